package images

import (
	"archive/tar"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"time"
)

// epoch is every entry's modification time in a layer, so the same tree
// makes the same layer digest.
var epoch = time.Unix(0, 0).UTC()

// skipped are rootfs paths whose content stays out of a layer: the runtime
// mounts its own /dev, /proc and /sys (the directories themselves are kept).
var skipped = map[string]bool{"dev": true, "proc": true, "sys": true}

// writeLayer writes the tree at root as an uncompressed layer tar to w:
// entries in lexical order, owners and modes as on disk, hard links as
// links, device nodes, sockets and pipes left out, every time epoch.
func writeLayer(w io.Writer, root string) error {
	tw := tar.NewWriter(w)
	links := map[[2]uint64]string{} // (device, inode) -> first path
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(root, path)
		if err != nil || rel == "." {
			return err
		}
		rel = filepath.ToSlash(rel)
		if parent, _, _ := strings.Cut(rel, "/"); skipped[parent] && parent != rel {
			if d.IsDir() {
				return filepath.SkipDir
			}
			return nil
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		mode := info.Mode()
		if mode&(fs.ModeDevice|fs.ModeCharDevice|fs.ModeSocket|fs.ModeNamedPipe) != 0 {
			return nil
		}
		var target string
		if mode&fs.ModeSymlink != 0 {
			if target, err = os.Readlink(path); err != nil {
				return err
			}
		}
		hdr, err := tar.FileInfoHeader(info, target)
		if err != nil {
			return err
		}
		hdr.Name = rel
		if info.IsDir() {
			hdr.Name += "/"
		}
		hdr.ModTime, hdr.AccessTime, hdr.ChangeTime = epoch, time.Time{}, time.Time{}
		hdr.Uname, hdr.Gname = "", ""
		hdr.Format = tar.FormatPAX
		st, ok := info.Sys().(*syscall.Stat_t)
		if !ok {
			return fmt.Errorf("images: no owner for %s", path)
		}
		hdr.Uid, hdr.Gid = int(st.Uid), int(st.Gid)
		if mode.IsRegular() && st.Nlink > 1 {
			key := [2]uint64{st.Dev, st.Ino}
			if first, seen := links[key]; seen {
				hdr.Typeflag, hdr.Linkname, hdr.Size = tar.TypeLink, first, 0
				return tw.WriteHeader(hdr)
			}
			links[key] = rel
		}
		if err := tw.WriteHeader(hdr); err != nil {
			return err
		}
		if !mode.IsRegular() {
			return nil
		}
		f, err := os.Open(path)
		if err != nil {
			return err
		}
		defer f.Close()
		_, err = io.Copy(tw, f)
		return err
	})
	if err != nil {
		return fmt.Errorf("images: layer of %s: %w", root, err)
	}
	return tw.Close()
}
