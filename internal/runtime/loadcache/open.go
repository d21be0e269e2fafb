package loadcache

import (
	"log/slog"
	"path/filepath"

	"aimon.dev/gw/internal/exec/sandbox"
)

// Open is the cache a --cache flag names: the user's cache directory for
// "", none for "off" or when the user has no cache directory (a fresh
// load each time). No sandbox this process makes may write it (rule R8):
// a record a command wrote would be a policy.
func Open(dir string, log *slog.Logger) *Cache {
	if dir == "off" {
		return nil
	}
	if dir == "" {
		dir, _ = DefaultDir()
	}
	if dir != "" {
		dir, _ = filepath.Abs(dir)
	}
	if dir == "" {
		return nil
	}
	sandbox.ProtectDir(sandbox.WhatCache, dir)
	return &Cache{Dir: dir, Log: log}
}
