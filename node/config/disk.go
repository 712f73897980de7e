package config

import (
	"gopkg.in/yaml.v3"

	"github.com/cshare/cshare/runtime/hw"
)

// Bounds and default of disk.reserve, in MB.
const (
	DefaultDiskReserveMB = 32
	MaxDiskReserveMB     = 1 << 20 // 1 TiB
)

// Disk is the disk: section: the reserve the node keeps free on its data
// dir's filesystem (see package internal/diskguard).
type Disk struct {
	// ReserveMB is disk.reserve: nil = the default; 0 turns the guard off.
	ReserveMB *int64
}

func (p *parser) disk(n *yaml.Node, path string) (Disk, error) {
	var d Disk
	entries, err := p.mapping(n, path, "reserve")
	if err != nil {
		return d, err
	}
	for _, e := range entries {
		v, err := p.sizeMB(e)
		if err != nil {
			return d, err
		}
		d.ReserveMB = &v
	}
	return d, nil
}

// checkDisk checks disk.reserve's range (what does not depend on the
// machine).
func (f File) checkDisk() error {
	if r := f.Disk.ReserveMB; r != nil && (*r < 0 || *r > MaxDiskReserveMB) {
		return f.errAt("disk.reserve", "%d MB is outside 0..%d (0 turns the reserve off)", *r, MaxDiskReserveMB)
	}
	return nil
}

// DiskReserveMB is the reserve to keep free on the data dir's filesystem,
// in MB: disk.reserve, or the default, 32 MB but at most an eighth of the
// filesystem (h.DiskMB; at least 1 MB). The node keeps that much free and
// as much again in a ballast file, so a reserve may take at most a quarter
// of the filesystem. 0: no reserve.
func (f File) DiskReserveMB(h hw.Hardware) (int64, error) {
	if err := f.checkDisk(); err != nil {
		return 0, err
	}
	if f.Disk.ReserveMB == nil {
		if h.DiskMB <= 0 {
			return DefaultDiskReserveMB, nil
		}
		return max(min(DefaultDiskReserveMB, h.DiskMB/8), 1), nil
	}
	r := *f.Disk.ReserveMB
	if h.DiskMB > 0 && r > h.DiskMB/4 {
		return 0, f.errAt("disk.reserve", "%d MB is more than a quarter of the data dir's disk (%d MB): cshare keeps the reserve free and as much again in its ballast file; allowed: 0..%d", r, h.DiskMB, h.DiskMB/4)
	}
	return r, nil
}
