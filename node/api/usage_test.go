package api

import "context"

// OrgUsage makes the stub a UsageService: it echoes the window it was
// given.
func (stub) OrgUsage(_ context.Context, since, until int64) (OrgUsage, error) {
	return OrgUsage{Since: sprintf("%d", since), Until: sprintf("%d", until), Persons: []PersonUsage{}, Machines: []MachineUsage{}}, nil
}
