package runtime

import "context"

// EnsureImage makes sure ref is present, pulling it (with optional auth) when
// it is not. The error names the image and matches ErrImageNotFound.
func (d *Docker) EnsureImage(ctx context.Context, ref string, auth *RegistryAuth) error {
	return d.ensureImage(ctx, ref, auth)
}
