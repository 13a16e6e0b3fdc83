package main

import (
	"fmt"
	"log"
	"net"
	"net/http"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"
)

// echoBackend is the origin behind the gateway. Every answer starts with the line
// "hello from the backend behind istio", then the request line exactly as received (origin-form or
// not) and the request headers, one per line, so that a check sees what the proxy sent.
//
//	/slow?ms=N      answers after N ms (default 3000): a route timeout shows as 504.
//	/retry/KEY      answers 503 to the first request for KEY, 200 after: a retry shows as 200
//	                with "attempt: 2".
//
// Every answer carries x-backend: echo and x-backend-remove: yes (a response header a
// VirtualService removes).
type echoBackend struct {
	mu       sync.Mutex
	attempts map[string]int
}

func (b *echoBackend) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	var sb strings.Builder
	sb.WriteString("hello from the backend behind istio\n")
	fmt.Fprintf(&sb, "%s %s %s\n", r.Method, r.RequestURI, r.Proto)
	fmt.Fprintf(&sb, "host: %s\n", r.Host)
	names := make([]string, 0, len(r.Header))
	for k := range r.Header {
		names = append(names, k)
	}
	sort.Strings(names)
	for _, k := range names {
		for _, v := range r.Header[k] {
			fmt.Fprintf(&sb, "%s: %s\n", strings.ToLower(k), v)
		}
	}
	w.Header().Set("x-backend", "echo")
	w.Header().Set("x-backend-remove", "yes")
	w.Header().Set("content-type", "text/plain")
	status := http.StatusOK
	switch {
	case strings.HasPrefix(r.URL.Path, "/slow"):
		ms, err := strconv.Atoi(r.URL.Query().Get("ms"))
		if err != nil {
			ms = 3000
		}
		time.Sleep(time.Duration(ms) * time.Millisecond)
	case strings.HasPrefix(r.URL.Path, "/retry/"):
		b.mu.Lock()
		b.attempts[r.URL.Path]++
		n := b.attempts[r.URL.Path]
		b.mu.Unlock()
		fmt.Fprintf(&sb, "attempt: %d\n", n)
		if n == 1 {
			status = http.StatusServiceUnavailable
		}
	}
	w.WriteHeader(status)
	_, _ = w.Write([]byte(sb.String()))
}

// mirrorBackend records every request it gets (request line and Host); GET /__mirrored on it
// lists them, one a line. It is the target of the VirtualService's mirror.
type mirrorBackend struct {
	mu   sync.Mutex
	seen []string
}

func (m *mirrorBackend) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.URL.Path == "/__mirrored" {
		m.mu.Lock()
		out := strings.Join(m.seen, "\n")
		m.mu.Unlock()
		_, _ = w.Write([]byte(out + "\n"))
		return
	}
	m.mu.Lock()
	m.seen = append(m.seen, fmt.Sprintf("%s %s %s host=%s", r.Method, r.RequestURI, r.Proto, r.Host))
	m.mu.Unlock()
	_, _ = w.Write([]byte("mirror\n"))
}

// serveBackend listens on 127.0.0.1:port and serves h in the background.
func serveBackend(port int, h http.Handler, t *failer) {
	l, err := net.Listen("tcp", fmt.Sprintf("127.0.0.1:%d", port))
	if err != nil {
		t.Fatalf("backend on port %d: %v", port, err)
	}
	srv := &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second}
	t.Cleanup(func() { _ = srv.Close() })
	go func() {
		if err := srv.Serve(l); err != nil && err != http.ErrServerClosed {
			log.Printf("istio-harness: backend on %d: %v", port, err)
		}
	}()
}

// serveDebug serves istiod's debug endpoints (/debug/connections, /debug/config_dump?proxyID=...,
// /debug/syncz) on addr.
func serveDebug(addr string, h http.Handler, t *failer) {
	l, err := net.Listen("tcp", addr)
	if err != nil {
		t.Fatalf("debug endpoints on %s: %v", addr, err)
	}
	srv := &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second}
	t.Cleanup(func() { _ = srv.Close() })
	go func() { _ = srv.Serve(l) }()
}
