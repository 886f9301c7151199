package engine

// ServingRequest marks a small request in progress, as the engine's
// reads and small writes do (loadGC), until the function it returns is
// called.
func ServingRequest() (done func()) { return processLoadGC.serving() }

// RequestsOverlapped reports whether a small request started while
// another was in progress since it was last called, and clears that.
func RequestsOverlapped() bool { return processLoadGC.concurrent.Swap(false) }
