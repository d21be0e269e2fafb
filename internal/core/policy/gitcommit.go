package policy

import (
	"github.com/go-git/go-git/v5"
)

// GitCommit is the commit checked out where dir lies, when dir is in a git
// work tree (a linked one too, as git-sync makes); "" otherwise. The
// revision is what was read; the commit names where it came from, for an
// operator to find it.
func GitCommit(dir string) string {
	if dir == "" {
		return ""
	}
	r, err := git.PlainOpenWithOptions(dir, &git.PlainOpenOptions{DetectDotGit: true, EnableDotGitCommonDir: true})
	if err != nil {
		return ""
	}
	head, err := r.Head()
	if err != nil {
		return ""
	}
	return head.Hash().String()
}
