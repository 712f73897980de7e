package smartshare

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
)

// RunPlanCommand is `cshare smartshare plan`: it reads an Input from the
// JSON file at inputPath ("-" reads standard input), plans it and writes
// the Result to stdout, as one JSON value when asJSON, else as a table. A
// returned error is one line for the user (the CLI exits 2).
func RunPlanCommand(inputPath string, asJSON bool, stdout io.Writer) error {
	var data []byte
	var err error
	name := inputPath
	switch inputPath {
	case "":
		return errors.New("input: no file given; pass the path of a JSON plan input (or - for standard input)")
	case "-":
		name = "standard input"
		data, err = io.ReadAll(os.Stdin)
	default:
		data, err = os.ReadFile(inputPath)
	}
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return fmt.Errorf("%s: no such file", name)
		}
		return fmt.Errorf("%s: cannot read: %v", name, err)
	}
	in, err := DecodeInput(data)
	if err != nil {
		return fmt.Errorf("%s: %w", name, err)
	}
	res := Plan(in)
	if asJSON {
		enc := json.NewEncoder(stdout)
		if err := enc.Encode(res); err != nil {
			return fmt.Errorf("writing the plan: %v", err)
		}
		return nil
	}
	if err := WriteTable(stdout, res); err != nil {
		return fmt.Errorf("writing the plan: %v", err)
	}
	return nil
}
