// eg-probe: the backends and the non-curl clients of scripts/run-envoy-gateway's feature checks.
//
//	eg-probe serve -ports-file F -tls-cert C -tls-key K
//	    binds every backend on 127.0.0.1 (port 0), writes their ports to F as JSON
//	    ({"a":…,"b":…,"mirror":…,"tcp":…,"tls":…,"grpc":…}) and serves until killed:
//	    a, b, mirror, tcp: HTTP/1.1 (and h2c) echo servers; tls: the same over TLS (C, K);
//	    grpc: gRPC health service (h2c) that echoes what it saw in response headers.
//	eg-probe ws -connect HOST:PORT URL MESSAGE      WebSocket round trip, prints the reply
//	eg-probe grpc -connect HOST:PORT -authority A -ca F   grpc.health.v1.Health/Check over
//	    TLS, prints {"status":…,"headers":{…}} as JSON
//
// The echo servers answer every request with JSON: the backend's name, the request line as
// received (method, request target, protocol), Host and the headers; response headers
// x-backend (its name) and x-backend-drop (for a response header modifier to remove).
// Behaviour on request: query delay_ms=N waits N ms first; fail=N&key=K answers 503 to the
// first N requests carrying key K (retries); path /__seen answers the requests recorded so
// far (the mirror target); an Upgrade: websocket request is echoed over WebSocket.
package main

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"flag"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"os"
	"strconv"
	"sync"
	"time"

	"github.com/gorilla/websocket"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/metadata"
)

func main() {
	if len(os.Args) < 2 {
		fmt.Fprintln(os.Stderr, "usage: eg-probe serve|ws|grpc ...")
		os.Exit(2)
	}
	var err error
	switch os.Args[1] {
	case "serve":
		err = serve(os.Args[2:])
	case "ws":
		err = wsClient(os.Args[2:])
	case "grpc":
		err = grpcClient(os.Args[2:])
	default:
		err = fmt.Errorf("unknown command %q", os.Args[1])
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "eg-probe:", err)
		os.Exit(1)
	}
}

// echo is one named echo backend.
type echo struct {
	name  string
	mu    sync.Mutex
	seen  []map[string]any
	fails map[string]int
}

func (e *echo) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	seen := map[string]any{
		"backend": e.name, "method": r.Method, "target": r.RequestURI, "proto": r.Proto,
		"host": r.Host, "headers": r.Header,
	}
	if r.URL.Path == "/__seen" {
		e.mu.Lock()
		defer e.mu.Unlock()
		_ = json.NewEncoder(w).Encode(e.seen)
		return
	}
	e.mu.Lock()
	e.seen = append(e.seen, seen)
	failing := false
	if n, err := strconv.Atoi(q.Get("fail")); err == nil && e.fails[q.Get("key")] < n {
		e.fails[q.Get("key")]++
		failing = true
	}
	attempts := e.fails[q.Get("key")]
	e.mu.Unlock()
	if websocket.IsWebSocketUpgrade(r) {
		e.websocket(w, r)
		return
	}
	if ms, err := strconv.Atoi(q.Get("delay_ms")); err == nil {
		select {
		case <-time.After(time.Duration(ms) * time.Millisecond):
		case <-r.Context().Done():
			return
		}
	}
	w.Header().Set("x-backend", e.name)
	w.Header().Set("x-backend-drop", "1")
	w.Header().Set("content-type", "application/json")
	if failing {
		w.Header().Set("x-failed-attempts", strconv.Itoa(attempts))
		w.WriteHeader(http.StatusServiceUnavailable)
	}
	seen["failed_attempts"] = attempts
	_ = json.NewEncoder(w).Encode(seen)
}

func (e *echo) websocket(w http.ResponseWriter, r *http.Request) {
	up := websocket.Upgrader{CheckOrigin: func(*http.Request) bool { return true }}
	c, err := up.Upgrade(w, r, nil)
	if err != nil {
		return
	}
	defer c.Close()
	for {
		kind, msg, err := c.ReadMessage()
		if err != nil {
			return
		}
		reply := fmt.Sprintf("%s %s %s", e.name, r.RequestURI, msg)
		if c.WriteMessage(kind, []byte(reply)) != nil {
			return
		}
	}
}

// echoHeaders is the gRPC side: every response carries what the server saw.
func echoHeaders(ctx context.Context, req any, info *grpc.UnaryServerInfo, h grpc.UnaryHandler) (any, error) {
	md, _ := metadata.FromIncomingContext(ctx)
	out := metadata.Pairs("x-backend", "grpc", "x-seen-method", info.FullMethod)
	for _, k := range []string{":authority", "x-route", "x-forwarded-proto"} {
		for _, v := range md.Get(k) {
			out.Append("x-seen-"+trimColon(k), v)
		}
	}
	_ = grpc.SetHeader(ctx, out)
	return h(ctx, req)
}

func trimColon(k string) string {
	if len(k) > 0 && k[0] == ':' {
		return k[1:]
	}
	return k
}

func listen() (net.Listener, int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, 0, err
	}
	return l, l.Addr().(*net.TCPAddr).Port, nil
}

func serve(args []string) error {
	fs := flag.NewFlagSet("serve", flag.ExitOnError)
	portsFile := fs.String("ports-file", "", "where to write the ports (JSON)")
	cert := fs.String("tls-cert", "", "certificate of the tls backend (PEM)")
	key := fs.String("tls-key", "", "its key (PEM)")
	_ = fs.Parse(args)
	ports := map[string]int{}
	errs := make(chan error, 8)
	for _, name := range []string{"a", "b", "mirror", "tcp", "tls"} {
		l, port, err := listen()
		if err != nil {
			return err
		}
		ports[name] = port
		srv := &http.Server{Handler: &echo{name: name, fails: map[string]int{}}}
		srv.Protocols = new(http.Protocols)
		srv.Protocols.SetHTTP1(true)
		srv.Protocols.SetUnencryptedHTTP2(name != "tls")
		srv.Protocols.SetHTTP2(name == "tls")
		if name == "tls" {
			go func() { errs <- srv.ServeTLS(l, *cert, *key) }()
		} else {
			go func() { errs <- srv.Serve(l) }()
		}
	}
	l, port, err := listen()
	if err != nil {
		return err
	}
	ports["grpc"] = port
	g := grpc.NewServer(grpc.UnaryInterceptor(echoHeaders))
	healthpb.RegisterHealthServer(g, health.NewServer())
	go func() { errs <- g.Serve(l) }()

	text, _ := json.Marshal(ports)
	if err := os.WriteFile(*portsFile+".tmp", text, 0o644); err != nil {
		return err
	}
	if err := os.Rename(*portsFile+".tmp", *portsFile); err != nil {
		return err
	}
	return <-errs
}

func tlsConfig(caFile, serverName string) (*tls.Config, error) {
	pem, err := os.ReadFile(caFile)
	if err != nil {
		return nil, err
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(pem) {
		return nil, fmt.Errorf("%s: no certificate", caFile)
	}
	return &tls.Config{RootCAs: pool, ServerName: serverName}, nil
}

func wsClient(args []string) error {
	fs := flag.NewFlagSet("ws", flag.ExitOnError)
	connect := fs.String("connect", "", "HOST:PORT to connect to, whatever the URL's host")
	ca := fs.String("ca", "", "CA file for wss://")
	_ = fs.Parse(args)
	if fs.NArg() != 2 {
		return fmt.Errorf("ws: URL and MESSAGE expected")
	}
	u, err := url.Parse(fs.Arg(0))
	if err != nil {
		return err
	}
	d := websocket.Dialer{HandshakeTimeout: 5 * time.Second}
	if *connect != "" {
		d.NetDial = func(network, _ string) (net.Conn, error) { return net.Dial(network, *connect) }
	}
	if *ca != "" {
		if d.TLSClientConfig, err = tlsConfig(*ca, u.Hostname()); err != nil {
			return err
		}
	}
	c, resp, err := d.Dial(u.String(), nil)
	if err != nil {
		if resp != nil {
			return fmt.Errorf("%w (HTTP %s)", err, resp.Status)
		}
		return err
	}
	defer c.Close()
	_ = c.SetReadDeadline(time.Now().Add(5 * time.Second))
	if err := c.WriteMessage(websocket.TextMessage, []byte(fs.Arg(1))); err != nil {
		return err
	}
	_, reply, err := c.ReadMessage()
	if err != nil {
		return err
	}
	fmt.Println(string(reply))
	return nil
}

func grpcClient(args []string) error {
	fs := flag.NewFlagSet("grpc", flag.ExitOnError)
	connect := fs.String("connect", "", "HOST:PORT")
	authority := fs.String("authority", "", ":authority and TLS server name")
	ca := fs.String("ca", "", "CA file (TLS); plaintext h2c without")
	_ = fs.Parse(args)
	var creds grpc.DialOption
	if *ca != "" {
		cfg, err := tlsConfig(*ca, *authority)
		if err != nil {
			return err
		}
		creds = grpc.WithTransportCredentials(credentials.NewTLS(cfg))
	} else {
		creds = grpc.WithTransportCredentials(insecure.NewCredentials())
	}
	conn, err := grpc.NewClient("passthrough:///"+*connect, creds, grpc.WithAuthority(*authority))
	if err != nil {
		return err
	}
	defer conn.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	var header metadata.MD
	resp, err := healthpb.NewHealthClient(conn).Check(ctx, &healthpb.HealthCheckRequest{}, grpc.Header(&header))
	if err != nil {
		return err
	}
	return json.NewEncoder(os.Stdout).Encode(map[string]any{"status": resp.GetStatus().String(), "headers": header})
}
