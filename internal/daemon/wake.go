package daemon

// wakeups fans this process's wake-ups out to what follows the log: a
// commit wakes the notifier (other replicas), the tailer (this process's
// streams) and the webhook deliverer; an access change wakes the tailer.
//
// It is built before the store, because the store's commit hook calls it,
// while the notifier, the tailer and the deliverer are built after the
// store, from it. That cycle is why it takes its targets by registration
// (onCommit, onAccess) rather than at construction. build registers every
// target before the first commit (Bootstrap) and none after, and nothing
// runs concurrently with build, so the lists are read-only once anything
// reads them and need no lock.
type wakeups struct {
	commits []func(dbID int64)
	access  []func()
}

// onCommit registers fn to be called with the database of every commit.
func (w *wakeups) onCommit(fn func(dbID int64)) { w.commits = append(w.commits, fn) }

// onAccess registers fn to be called after every access change.
func (w *wakeups) onAccess(fn func()) { w.access = append(w.access, fn) }

// committed wakes every commit target, in the order registered.
func (w *wakeups) committed(dbID int64) {
	for _, fn := range w.commits {
		fn(dbID)
	}
}

// accessChanged wakes every access target.
func (w *wakeups) accessChanged() {
	for _, fn := range w.access {
		fn()
	}
}
