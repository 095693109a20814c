// Package ssdtest simulates a failing device under the SSD tier, for tests
// of what the tier does when the disk returns EIO, fills up, fails an
// fdatasync or dies in the middle of a write.
//
// A Disk is an ssd.FS over the operating system's files and a pebble
// vfs.FS for the index, both failing as told:
//
//	d := ssdtest.NewDisk(1)
//	s, _ := ssd.Open(ssd.Options{Dir: dir, Capacity: 64 << 20, Files: d.Files(), IndexFS: d.Index()})
//	d.Inject(ssdtest.Fault{Op: ssdtest.OpSync, Err: syscall.EIO})
//	// ... puts fail and are not acknowledged; the tier is degraded ...
//	d.Clear()
//	// ... the tier's probe finds the device well and it takes puts again.
package ssdtest
