package backup

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
)

// The files a restored node starts from, in its data directory. Redis 7.0
// loads dump.rdb only with appendonly no; with appendonly yes (the
// operator's default) it loads the multi-part AOF that
// appendonlydir/appendonly.aof.manifest lists and ignores dump.rdb, so the
// RDB is also linked in as that AOF's base file (Redis 7.0 aof.c: a base
// file may be an RDB, "type b", named <appendfilename>.<seq>.base.rdb).
// With the defaults appenddirname appendonlydir and appendfilename
// appendonly.aof, which the operator does not change.
const (
	rdbFile         = "dump.rdb"
	aofDir          = "appendonlydir"
	aofBaseFile     = "appendonly.aof.1.base.rdb"
	aofManifestFile = "appendonly.aof.manifest"
	aofManifest     = "file " + aofBaseFile + " seq 1 type b\n"
	// nodesFile is the node's cluster config: a data directory holding it
	// belongs to a node that started before, whose data is its own.
	nodesFile = "nodes.conf"
)

// ReadManifest fetches and parses the manifest of the backup at backupPath
// and checks that every shard's object is under backupPath (an error
// wrapping ErrManifestMismatch otherwise). Whose backup it is, the caller
// checks (CheckManifest).
func ReadManifest(ctx context.Context, store *Store, backupPath string) (*Manifest, error) {
	r, err := store.Get(ctx, ManifestKey(backupPath))
	if err != nil {
		return nil, fmt.Errorf("reading the manifest of %s: %w", backupPath, err)
	}
	defer func() { _ = r.Close() }()
	m, err := ParseManifest(r)
	if err != nil {
		return nil, err
	}
	if err := checkObjectKeys(m, backupPath); err != nil {
		return nil, err
	}
	return m, nil
}

// ErrAlreadyStarted is returned by Fetch when dataDir already belongs to a
// node that ran, or was restored already (it holds nodes.conf or
// dump.rdb): nothing is written.
var ErrAlreadyStarted = errors.New("the data directory already holds a node's data")

// Fetch downloads shard's RDB (its index in the manifest at backupPath)
// into dataDir as dump.rdb and as the base of a one-file AOF, checking
// its size and SHA-256 against the manifest before anything is renamed
// into place. It returns the number of bytes written. Errors:
// ErrAlreadyStarted; ErrInvalidPath; ErrManifestMismatch (an object key
// outside backupPath); a shard index outside the manifest; the store's;
// a size or checksum mismatch (the downloaded file is removed).
func Fetch(ctx context.Context, store *Store, backupPath string, shard int, dataDir string) (int64, error) {
	for _, f := range []string{nodesFile, rdbFile} {
		if _, err := os.Stat(filepath.Join(dataDir, f)); err == nil {
			return 0, fmt.Errorf("%s: %w (%s)", dataDir, ErrAlreadyStarted, f)
		}
	}
	if _, err := ParseBackupPath(backupPath); err != nil {
		return 0, err
	}
	m, err := ReadManifest(ctx, store, backupPath)
	if err != nil {
		return 0, err
	}
	if shard < 0 || shard >= len(m.Shards) {
		return 0, fmt.Errorf("shard %d: the backup at %s has %d shards", shard, backupPath, len(m.Shards))
	}
	want := m.Shards[shard]
	r, err := store.Get(ctx, want.ObjectKey)
	if err != nil {
		return 0, err
	}
	defer func() { _ = r.Close() }()
	tmp := filepath.Join(dataDir, rdbFile+".restore")
	f, err := os.OpenFile(tmp, os.O_CREATE|os.O_TRUNC|os.O_WRONLY, 0o600)
	if err != nil {
		return 0, err
	}
	h := sha256.New()
	n, err := io.Copy(io.MultiWriter(f, h), r)
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil && n != want.Size {
		err = fmt.Errorf("%s: %d bytes downloaded, the manifest says %d", want.ObjectKey, n, want.Size)
	}
	if sum := hex.EncodeToString(h.Sum(nil)); err == nil && sum != want.SHA256 {
		err = fmt.Errorf("%s: SHA-256 %s, the manifest says %s", want.ObjectKey, sum, want.SHA256)
	}
	if err != nil {
		_ = os.Remove(tmp)
		return 0, err
	}
	// The AOF first, dump.rdb last: dump.rdb's presence is what a second
	// run reads as "done".
	dir := filepath.Join(dataDir, aofDir)
	if err := os.RemoveAll(dir); err != nil { // what an earlier run cut short left
		return 0, err
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return 0, err
	}
	if err := os.Link(tmp, filepath.Join(dir, aofBaseFile)); err != nil {
		return 0, err
	}
	if err := os.WriteFile(filepath.Join(dir, aofManifestFile), []byte(aofManifest), 0o600); err != nil {
		return 0, err
	}
	if err := os.Rename(tmp, filepath.Join(dataDir, rdbFile)); err != nil {
		return 0, err
	}
	return n, nil
}
