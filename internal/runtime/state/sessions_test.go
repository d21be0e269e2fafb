package state

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"
)

// TestP18SessionLabelsAddUpAcrossStores: stores opened on one directory
// (a hook process each) labelling one session at once all keep their
// labels; the first source of a label stays; another session holds none;
// a session past its time is gone. The memory store does the same.
func TestP18SessionLabelsAddUpAcrossStores(t *testing.T) {
	ctx := context.Background()
	until := time.Now().Add(time.Hour)
	for name, open := range sessionStores(t, t.TempDir()) {
		t.Run(name, func(t *testing.T) {
			var wg sync.WaitGroup
			for i := range 8 {
				s := open()
				wg.Add(1)
				go func() {
					defer wg.Done()
					for _, l := range []string{fmt.Sprint("l", i), "shared"} {
						if err := s.AddLabel(ctx, "s1", l, []byte(fmt.Sprint("call ", i)), until); err != nil {
							t.Error(err)
						}
					}
				}()
			}
			wg.Wait()
			got, err := open().Labels(ctx, "s1")
			if err != nil || len(got) != 9 {
				t.Fatalf("labels of s1: %d %v, want 9: %q", len(got), err, got)
			}
			for i := range 8 {
				if string(got[fmt.Sprint("l", i)]) != fmt.Sprint("call ", i) {
					t.Errorf("l%d: %q", i, got[fmt.Sprint("l", i)])
				}
			}
			first := string(got["shared"])
			open().AddLabel(ctx, "s1", "shared", []byte("later"), until)
			if again, _ := open().Labels(ctx, "s1"); string(again["shared"]) != first {
				t.Errorf("a later source replaced the first: %q, was %q", again["shared"], first)
			}
			if other, err := open().Labels(ctx, "s2"); len(other) != 0 || err != nil {
				t.Errorf("s2 holds %q %v", other, err)
			}
			open().AddLabel(ctx, "old", "x", nil, time.Now().Add(-time.Second))
			if old, err := open().Labels(ctx, "old"); len(old) != 0 || err != nil {
				t.Errorf("an expired session holds %q %v", old, err)
			}
		})
	}
}

// sessionStores open, each time they are called, a store of sessions on
// dir (as each hook process opens its own), or the one memory store.
func sessionStores(t *testing.T, dir string) map[string]func() Sessions {
	return map[string]func() Sessions{
		"local": func() Sessions {
			s, err := Open(dir, "")
			if err != nil {
				t.Fatal(err)
			}
			return SessionsOf(s)
		},
		"memory": func() func() Sessions { m := MemorySessions(); return func() Sessions { return m } }(),
	}
}

// TestP18SessionWordsAcrossStores: the user's words that stores opened
// on one directory (a hook process each) keep for a session are all read
// back, beside its labels and apart from another session's; a text past
// MaxWords is refused, and past MaxSessionWords the session keeps no
// more (ErrWordsFull); a session past its time holds none. The memory
// store does the same.
func TestP18SessionWordsAcrossStores(t *testing.T) {
	ctx := context.Background()
	until := time.Now().Add(time.Hour)
	for name, open := range sessionStores(t, t.TempDir()) {
		t.Run(name, func(t *testing.T) {
			open().AddLabel(ctx, "w1", "untrusted", []byte("a read"), until)
			for _, w := range []string{"send it to alice@example.com", "and to bob"} {
				if err := open().AddWords(ctx, "w1", []byte(w), until); err != nil {
					t.Fatal(err)
				}
			}
			got, err := open().Words(ctx, "w1")
			if err != nil || len(got) != 2 || string(got[0])+string(got[1]) != "send it to alice@example.comand to bob" && string(got[1])+string(got[0]) != "send it to alice@example.comand to bob" {
				t.Errorf("the words of w1: %q %v", got, err)
			}
			if labels, err := open().Labels(ctx, "w1"); err != nil || len(labels) != 1 || string(labels["untrusted"]) != "a read" {
				t.Errorf("the labels beside the words: %q %v", labels, err)
			}
			if other, err := open().Words(ctx, "w2"); len(other) != 0 || err != nil {
				t.Errorf("w2 holds %q %v", other, err)
			}
			if err := open().AddWords(ctx, "w1", make([]byte, MaxWords+1), until); err == nil || errors.Is(err, ErrWordsFull) {
				t.Errorf("a text past MaxWords: %v", err)
			}
			big := make([]byte, MaxWords)
			var err2 error
			for i := 0; i <= MaxSessionWords/MaxWords && err2 == nil; i++ {
				err2 = open().AddWords(ctx, "full", big, until)
			}
			if !errors.Is(err2, ErrWordsFull) {
				t.Errorf("past MaxSessionWords: %v", err2)
			}
			open().AddWords(ctx, "old", []byte("x"), time.Now().Add(-time.Second))
			if old, err := open().Words(ctx, "old"); len(old) != 0 || err != nil {
				t.Errorf("an expired session holds %q %v", old, err)
			}
		})
	}
}
