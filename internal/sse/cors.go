package sse

import "net/http"

// CORS wraps the GraphQL handler so browsers on other origins can use it
// with credentials: every response reflects the request's Origin (with
// Vary: Origin), and a preflight OPTIONS is answered 204 here, before
// authentication (a preflight carries no credentials). A preflight cannot
// tell a stream from a plain request (it does not carry the Accept value),
// so the whole endpoint answers CORS the same way.
func CORS(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h := w.Header()
		h.Add("Vary", "Origin")
		if o := r.Header.Get("Origin"); o != "" {
			h.Set("Access-Control-Allow-Origin", o)
			h.Set("Access-Control-Allow-Credentials", "true")
		}
		if r.Method != http.MethodOptions {
			next.ServeHTTP(w, r)
			return
		}
		h.Set("Access-Control-Allow-Methods", "GET, POST, OPTIONS")
		allow := "Authorization, Content-Type, Accept, Last-Event-ID, Cache-Control"
		if req := r.Header.Get("Access-Control-Request-Headers"); req != "" {
			allow = req
		}
		h.Set("Access-Control-Allow-Headers", allow)
		h.Set("Access-Control-Max-Age", "600")
		w.WriteHeader(http.StatusNoContent)
	})
}
