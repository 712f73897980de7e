package web

import (
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strconv"

	"github.com/cshare/cshare/node/api"
)

type logsData struct {
	Job  api.JobInfo
	Item int64
	Out  string
}

func (d *Dashboard) readLogs(r *http.Request, v *view) error {
	item, err := strconv.ParseInt(r.URL.Query().Get("item"), 10, 64)
	if err != nil {
		return api.FieldErrorf(http.StatusBadRequest, "item", "item: %q is not a number", api.Ellipsize(r.URL.Query().Get("item")))
	}
	j, err := d.svc.Jobs.Job(r.Context(), r.PathValue("id"))
	if err != nil {
		return err
	}
	out, err := d.svc.Jobs.JobLogs(r.Context(), j.ID, item)
	v.Data, v.Title = logsData{Job: j, Item: item, Out: string(out)}, "Logs of item "+strconv.FormatInt(item, 10)
	return err
}

// uploadAnswer is what POST /datasets/upload answers the page's script.
type uploadAnswer struct {
	Error string          `json:"error,omitempty"`
	Added api.DatasetInfo `json:"added"`
}

// upload takes a dataset from the browser (multipart: name, private, then
// file), streamed to a file in UploadDir, and adds it as `dataset add`
// does; the page shows the upload's progress from the browser's side.
func (d *Dashboard) upload(w http.ResponseWriter, r *http.Request) {
	if _, _, ok := d.checkPost(w, r); !ok {
		return
	}
	answer := func(code int, a uploadAnswer) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(code)
		_ = json.NewEncoder(w).Encode(a)
	}
	if d.up == "" {
		answer(http.StatusNotFound, uploadAnswer{Error: "upload: this node takes no uploads"})
		return
	}
	mr, err := r.MultipartReader()
	if err != nil {
		answer(http.StatusBadRequest, uploadAnswer{Error: "upload: " + err.Error()})
		return
	}
	req := api.DatasetAdd{}
	for {
		p, err := mr.NextPart()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			answer(http.StatusBadRequest, uploadAnswer{Error: "upload: " + err.Error()})
			return
		}
		switch p.FormName() {
		case "name", "private":
			b, _ := io.ReadAll(io.LimitReader(p, 4096))
			if p.FormName() == "name" {
				req.Name = string(b)
			} else {
				req.Private = string(b) != ""
			}
		case "file":
			if req.Name == "" {
				req.Name = p.FileName()
			}
			dir, path, err := d.spool(p, p.FileName())
			if dir != "" {
				defer os.RemoveAll(dir)
			}
			if err != nil {
				answer(http.StatusInternalServerError, uploadAnswer{Error: "upload: " + err.Error()})
				return
			}
			req.Path = path
		}
	}
	if req.Path == "" {
		answer(http.StatusBadRequest, uploadAnswer{Error: "file: choose a file to upload"})
		return
	}
	ds, err := d.svc.Datasets.AddDataset(r.Context(), req)
	if err != nil {
		answer(errCode(err), uploadAnswer{Error: err.Error()})
		return
	}
	answer(http.StatusOK, uploadAnswer{Added: ds})
}

// spool writes an upload to a new directory in UploadDir, under its own
// file name (its base; "upload" when it has none): the directory to remove
// afterwards and the file's path.
func (d *Dashboard) spool(src io.Reader, name string) (string, string, error) {
	if err := os.MkdirAll(d.up, 0o700); err != nil {
		return "", "", err
	}
	dir, err := os.MkdirTemp(d.up, "upload-*")
	if err != nil {
		return "", "", err
	}
	name = filepath.Base(filepath.Clean("/" + name))
	if name == "/" || name == "." {
		name = "upload"
	}
	f, err := os.OpenFile(filepath.Join(dir, name), os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o600)
	if err != nil {
		return dir, "", err
	}
	if _, err := io.Copy(f, src); err != nil {
		_ = f.Close()
		return dir, "", err
	}
	return dir, f.Name(), f.Close()
}
