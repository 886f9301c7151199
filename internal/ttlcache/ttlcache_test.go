package ttlcache

import (
	"testing"
	"time"
)

func TestCacheExpires(t *testing.T) {
	t.Parallel()
	now := time.Unix(1000, 0)
	c := New[string, int](time.Second, func() time.Time { return now })
	c.Put("a", 1)
	if v, ok := c.Get("a"); !ok || v != 1 {
		t.Fatalf("fresh entry: %v %v", v, ok)
	}
	now = now.Add(999 * time.Millisecond)
	if _, ok := c.Get("a"); !ok {
		t.Fatal("entry expired early")
	}
	now = now.Add(time.Millisecond)
	if _, ok := c.Get("a"); ok {
		t.Fatal("entry outlived its ttl")
	}
	c.Put("b", 2)
	c.Delete("b")
	c.Put("c", 3)
	c.Clear()
	if _, ok := c.Get("b"); ok {
		t.Fatal("deleted entry found")
	}
	if _, ok := c.Get("c"); ok {
		t.Fatal("cleared entry found")
	}
}
