package node

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
)

// ImagesDir holds the copies of this checkout's binaries that images run
// (the operator's, see LookupImage): binDir may sit under a directory that
// a pod's user cannot enter (a clone in a 0700 temporary directory), and a
// container starts its entrypoint as that user, so the node runs a copy
// in stateDir/images, which is 0755 like stateDir is made traversable
// (0711) for it.
func ImagesDir(stateDir string) string { return filepath.Join(stateDir, "images") }

// syncImageBinary copies src into ImagesDir when the copy there is missing
// or differs in size or modification time (a rebuilt bin/redis-operator is
// picked up by the next container start), and returns the copy's path.
// The copy is written beside the target and renamed over it, so a running
// container keeps its own (already open) binary.
func (n *Node) syncImageBinary(src string) (string, error) {
	si, err := os.Stat(src)
	if err != nil {
		return "", err
	}
	dir := ImagesDir(n.stateDir)
	dst := filepath.Join(dir, filepath.Base(src))
	if di, err := os.Stat(dst); err == nil && di.Size() == si.Size() && di.ModTime().Equal(si.ModTime()) {
		return dst, nil
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", err
	}
	if err := os.Chmod(n.stateDir, searchable(n.stateDir)); err != nil {
		return "", err
	}
	in, err := os.Open(src)
	if err != nil {
		return "", err
	}
	defer in.Close()
	tmp, err := os.CreateTemp(dir, ".copy-")
	if err != nil {
		return "", err
	}
	defer os.Remove(tmp.Name())
	if _, err := io.Copy(tmp, in); err != nil {
		tmp.Close()
		return "", fmt.Errorf("copying %s: %w", src, err)
	}
	if err := tmp.Close(); err != nil {
		return "", err
	}
	if err := os.Chmod(tmp.Name(), 0o755); err != nil {
		return "", err
	}
	if err := os.Chtimes(tmp.Name(), si.ModTime(), si.ModTime()); err != nil {
		return "", err
	}
	return dst, os.Rename(tmp.Name(), dst)
}

// searchable is dir's mode with the search (x) bits set for group and
// others, so that pod users can reach ImagesDir below it.
func searchable(dir string) os.FileMode {
	mode := os.FileMode(0o711)
	if fi, err := os.Stat(dir); err == nil {
		mode |= fi.Mode().Perm()
	}
	return mode
}
