package cli

import (
	"context"
	"fmt"
	"os"
	"sort"

	"github.com/spf13/cobra"

	"github.com/cshare/cshare/internal/regauth"
	"github.com/cshare/cshare/internal/text"
	"github.com/cshare/cshare/node/api"
	"github.com/cshare/cshare/node/ref"
)

// Private images (issue 31 item 6): --registry-auth FILE is read here and
// sealed with age before anything reaches the node, so the credentials
// travel and rest only sealed to the machines that may pull the image.

// readRegistryAuth reads FILE (a Docker config JSON, or a line user:token)
// for image; "" reads nothing.
func readRegistryAuth(cmd *cobra.Command, file, image string) (*regauth.Creds, error) {
	if file == "" {
		return nil, nil
	}
	if image == "" {
		return nil, usagef(cmd, "--registry-auth needs --image: the private image the credentials pull")
	}
	fi, err := os.Stat(file)
	if err != nil {
		return nil, usagef(cmd, "--registry-auth: %v", err)
	}
	if fi.Size() > regauth.MaxFile {
		return nil, usagef(cmd, "--registry-auth: %s is %d bytes; at most %d", text.Quote(file), fi.Size(), regauth.MaxFile)
	}
	b, err := os.ReadFile(file)
	if err != nil {
		return nil, usagef(cmd, "--registry-auth: %v", err)
	}
	c, err := regauth.ParseFile("--registry-auth", b, image)
	if err != nil {
		return nil, usagef(cmd, "%v", err)
	}
	return &c, nil
}

// me is the person this CLI's node acts for: credentials are sealed for
// them alone.
func me(ctx context.Context, cl *api.Client) (string, error) {
	st, err := cl.Status(ctx)
	if err != nil {
		return "", err
	}
	return st.Person, nil
}

// sealForOffer seals c to the host of the offer want names (an ID, or a
// unique prefix or suffix of one, as the node resolves it), and returns
// the offer's full ID with the blob.
func sealForOffer(ctx context.Context, cl *api.Client, c regauth.Creds, want string) (string, []byte, error) {
	offers, err := cl.Offers(ctx, "", "")
	if err != nil {
		return "", nil, err
	}
	sort.Slice(offers, func(i, j int) bool { return offers[i].ID < offers[j].ID })
	cands := make([]ref.Candidate, 0, len(offers))
	byID := map[string]api.OfferInfo{}
	for _, o := range offers {
		cands = append(cands, ref.Candidate{ID: o.ID})
		byID[o.ID] = o
	}
	id, err := ref.Resolve("offer", "cshare offer ls", want, cands)
	if err != nil {
		return "", nil, err
	}
	o := byID[id]
	if o.AgeRecipient == "" {
		return "", nil, fmt.Errorf("--registry-auth: the host of offer %s publishes no age recipient (its node is older than private images): ask its owner to upgrade and make the offer again", id)
	}
	person, err := me(ctx, cl)
	if err != nil {
		return "", nil, err
	}
	blob, err := regauth.Seal("--registry-auth", person, c, []string{o.AgeRecipient})
	return id, blob, err
}

// sealForMachines seals c to every approved machine that publishes an
// age recipient: which machine runs a job's items is not known at submit.
func sealForMachines(ctx context.Context, cl *api.Client, c regauth.Creds) ([]byte, error) {
	ms, err := cl.Machines(ctx)
	if err != nil {
		return nil, err
	}
	seen := map[string]bool{}
	var rs []string
	for _, m := range ms {
		if m.AgeRecipient != "" && !seen[m.AgeRecipient] {
			seen[m.AgeRecipient] = true
			rs = append(rs, m.AgeRecipient)
		}
	}
	sort.Strings(rs)
	person, err := me(ctx, cl)
	if err != nil {
		return nil, err
	}
	return regauth.Seal("--registry-auth", person, c, rs)
}
