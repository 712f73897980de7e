// Package ref resolves the references a user types for a job, machine,
// member, offer or contract to one ID, with one rule for every kind, and
// words the errors (a 404 for no match, a 409 listing the matches).
package ref

import (
	"fmt"
	"net/http"
	"strings"

	"github.com/cshare/cshare/node/api"
)

// A reference names a job, machine or member the way a user types it. The
// node alone resolves references (the CLI sends them as given), with one
// rule for every kind:
//
//  1. the full ID;
//  2. else an exact name (a job's name, a machine's name, or a member's:
//     the person's name);
//  3. else a unique prefix or suffix of the ID, of at least minRefLen
//     characters (the CLI's tables show IDs' last 12 characters).
//
// No match is a 404; several are a 409 Conflict whose one line lists them
// (at most maxListed, by ID and name).
const (
	minRefLen = 4
	maxListed = 5
)

// Candidate is something a reference may name.
type Candidate struct{ ID, Name string }

// Resolve finds the ID that ref names among cands, which are in a stable
// order. kind ("job") and list ("cshare job ls") word the errors.
func Resolve(kind, list, ref string, cands []Candidate) (string, error) {
	ref = strings.TrimSpace(ref)
	if ref == "" {
		return "", api.Errorf(http.StatusBadRequest, "%s: give %s ID or name (see %s)", kind, article(kind), list)
	}
	for _, c := range cands {
		if c.ID == ref {
			return c.ID, nil
		}
	}
	pick := func(match func(Candidate) bool) ([]Candidate, bool) {
		var hits []Candidate
		for _, c := range cands {
			if match(c) {
				hits = append(hits, c)
			}
		}
		return hits, len(hits) > 0
	}
	hits, ok := pick(func(c Candidate) bool { return c.Name != "" && c.Name == ref })
	if !ok && len(ref) >= minRefLen {
		hits, ok = pick(func(c Candidate) bool { return strings.HasPrefix(c.ID, ref) || strings.HasSuffix(c.ID, ref) })
	}
	switch {
	case !ok:
		return "", api.Errorf(http.StatusNotFound, "%s %q: no such %s (see %s)", kind, api.Ellipsize(ref), kind, list)
	case len(hits) == 1:
		return hits[0].ID, nil
	}
	names := make([]string, 0, maxListed+1)
	for i, h := range hits {
		if i == maxListed {
			names = append(names, fmt.Sprintf("and %d more", len(hits)-maxListed))
			break
		}
		s := h.ID
		if h.Name != "" {
			s += " (" + h.Name + ")"
		}
		names = append(names, s)
	}
	return "", api.Errorf(http.StatusConflict, "%s %q is ambiguous: it matches %d %ss: %s; give more of the ID",
		kind, api.Ellipsize(ref), len(hits), kind, strings.Join(names, ", "))
}

// article is kind with its indefinite article ("a job", "an offer").
func article(kind string) string {
	if kind != "" && strings.ContainsRune("aeiou", rune(kind[0])) {
		return "an " + kind
	}
	return "a " + kind
}
