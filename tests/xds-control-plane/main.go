// Command xds-control-plane is the xDS management server of quickshake's xDS tests: a real
// go-control-plane server (ADS state-of-the-world and delta, plus the separate LDS, CDS, RDS,
// EDS and SDS services) over one ADS snapshot cache, with a small HTTP admin API through which
// a test pushes snapshots and reads what the data plane ACKed and NACKed.
//
//	xds-control-plane --grpc-addr 127.0.0.1:18000 [--grpc-unix /tmp/xds.sock] --http-addr 127.0.0.1:18001
//
// Admin API:
//
//	PUT /snapshot?node=ID  {"version":"v1","resources":{"<type_url>":[<resource as protojson, no @type>, ...]}}
//	GET /status            what the callbacks saw, per node and type URL, and the request
//	                       metadata of the last stream per gRPC method (see status.go)
//	GET /healthz           "ok"
//
// Any type URL registered in the protobuf registry is accepted (Listener, RouteConfiguration,
// Cluster, ClusterLoadAssignment, Secret, ...); the Any typed_configs inside resolve through the
// extension packages imported below. Snapshots are not checked with Consistent(): the tests push
// deliberately bad or partial configurations.
package main

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"os"
	"os/signal"
	"syscall"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/reflect/protoregistry"

	clusterservice "github.com/envoyproxy/go-control-plane/envoy/service/cluster/v3"
	discoverygrpc "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	endpointservice "github.com/envoyproxy/go-control-plane/envoy/service/endpoint/v3"
	listenerservice "github.com/envoyproxy/go-control-plane/envoy/service/listener/v3"
	routeservice "github.com/envoyproxy/go-control-plane/envoy/service/route/v3"
	secretservice "github.com/envoyproxy/go-control-plane/envoy/service/secret/v3"
	"github.com/envoyproxy/go-control-plane/pkg/cache/types"
	"github.com/envoyproxy/go-control-plane/pkg/cache/v3"
	"github.com/envoyproxy/go-control-plane/pkg/resource/v3"
	"github.com/envoyproxy/go-control-plane/pkg/server/v3"

	// Resource types and the extensions their Any typed_configs name, so that protojson
	// resolves them. cryptomb comes from go-control-plane's contrib module (istiod's Secret).
	_ "github.com/envoyproxy/go-control-plane/contrib/envoy/extensions/private_key_providers/cryptomb/v3alpha"
	_ "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	_ "github.com/envoyproxy/go-control-plane/envoy/config/endpoint/v3"
	_ "github.com/envoyproxy/go-control-plane/envoy/config/listener/v3"
	_ "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	_ "github.com/envoyproxy/go-control-plane/envoy/extensions/access_loggers/file/v3"
	_ "github.com/envoyproxy/go-control-plane/envoy/extensions/access_loggers/stream/v3"
	_ "github.com/envoyproxy/go-control-plane/envoy/extensions/compression/gzip/compressor/v3"
	_ "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/compressor/v3"
	_ "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/health_check/v3"
	_ "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/router/v3"
	_ "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/listener/tls_inspector/v3"
	_ "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/http_connection_manager/v3"
	_ "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/tcp_proxy/v3"
	_ "github.com/envoyproxy/go-control-plane/envoy/extensions/load_balancing_policies/least_request/v3"
	_ "github.com/envoyproxy/go-control-plane/envoy/extensions/load_balancing_policies/maglev/v3"
	_ "github.com/envoyproxy/go-control-plane/envoy/extensions/load_balancing_policies/random/v3"
	_ "github.com/envoyproxy/go-control-plane/envoy/extensions/load_balancing_policies/ring_hash/v3"
	_ "github.com/envoyproxy/go-control-plane/envoy/extensions/load_balancing_policies/round_robin/v3"
	_ "github.com/envoyproxy/go-control-plane/envoy/extensions/transport_sockets/quic/v3"
	_ "github.com/envoyproxy/go-control-plane/envoy/extensions/transport_sockets/tls/v3"
	_ "github.com/envoyproxy/go-control-plane/envoy/extensions/upstreams/http/v3"
)

func main() {
	grpcAddr := flag.String("grpc-addr", "", "gRPC (xDS) listen address, host:port")
	grpcUnix := flag.String("grpc-unix", "", "gRPC (xDS) unix socket path")
	httpAddr := flag.String("http-addr", "127.0.0.1:0", "admin HTTP listen address, host:port")
	tlsCert := flag.String("tls-cert", "", "serve xDS over TLS with this PEM certificate (needs --tls-key)")
	tlsKey := flag.String("tls-key", "", "PEM private key of --tls-cert")
	clientCA := flag.String("tls-client-ca", "", "require client certificates signed by this PEM CA (mTLS)")
	flag.Parse()
	if *grpcAddr == "" && *grpcUnix == "" {
		log.Fatal("give --grpc-addr and/or --grpc-unix")
	}

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()

	snapshots := cache.NewSnapshotCache(true, cache.IDHash{}, quietLogger{})
	st := newStatus()
	xds := server.NewServer(ctx, snapshots, st)

	opts := []grpc.ServerOption{grpc.StreamInterceptor(st.recordMetadata)}
	if *tlsCert != "" {
		creds, err := serverTLS(*tlsCert, *tlsKey, *clientCA)
		if err != nil {
			log.Fatalf("TLS: %v", err)
		}
		opts = append(opts, grpc.Creds(creds))
	}
	gs := grpc.NewServer(opts...)
	discoverygrpc.RegisterAggregatedDiscoveryServiceServer(gs, xds)
	listenerservice.RegisterListenerDiscoveryServiceServer(gs, xds)
	routeservice.RegisterRouteDiscoveryServiceServer(gs, xds)
	clusterservice.RegisterClusterDiscoveryServiceServer(gs, xds)
	endpointservice.RegisterEndpointDiscoveryServiceServer(gs, xds)
	secretservice.RegisterSecretDiscoveryServiceServer(gs, xds)

	if *grpcAddr != "" {
		serveGRPC(gs, "tcp", *grpcAddr)
	}
	if *grpcUnix != "" {
		_ = os.Remove(*grpcUnix) // a socket left by a killed predecessor
		serveGRPC(gs, "unix", *grpcUnix)
	}

	mux := http.NewServeMux()
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) { io.WriteString(w, "ok\n") })
	mux.HandleFunc("GET /status", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(st.snapshotJSON())
	})
	mux.HandleFunc("PUT /snapshot", func(w http.ResponseWriter, r *http.Request) {
		node := r.URL.Query().Get("node")
		snap, version, err := parseSnapshot(r.Body)
		if err == nil && node == "" {
			err = errors.New("missing ?node=")
		}
		if err == nil {
			err = snapshots.SetSnapshot(ctx, node, snap)
		}
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		st.setPushed(node, version)
		io.WriteString(w, "ok\n")
	})
	hl, err := net.Listen("tcp", *httpAddr)
	if err != nil {
		log.Fatalf("admin listen %s: %v", *httpAddr, err)
	}
	log.Printf("admin on %s", hl.Addr())
	go func() { _ = http.Serve(hl, mux) }()

	<-ctx.Done()
	gs.Stop()
}

func serveGRPC(gs *grpc.Server, network, addr string) {
	l, err := net.Listen(network, addr)
	if err != nil {
		log.Fatalf("xDS listen %s %s: %v", network, addr, err)
	}
	log.Printf("xDS on %s %s", network, l.Addr())
	go func() {
		if err := gs.Serve(l); err != nil {
			log.Printf("xDS server on %s: %v", addr, err)
		}
	}()
}

// snapshotBody is the PUT /snapshot body.
type snapshotBody struct {
	Version   string                       `json:"version"`
	Resources map[string][]json.RawMessage `json:"resources"`
}

// parseSnapshot decodes each resource with protojson into the message its type URL names.
func parseSnapshot(body io.Reader) (*cache.Snapshot, string, error) {
	var b snapshotBody
	if err := json.NewDecoder(body).Decode(&b); err != nil {
		return nil, "", fmt.Errorf("body: %w", err)
	}
	if b.Version == "" {
		return nil, "", errors.New("missing version")
	}
	res := map[resource.Type][]types.Resource{}
	for typeURL, items := range b.Resources {
		mt, err := protoregistry.GlobalTypes.FindMessageByURL(typeURL)
		if err != nil {
			return nil, "", fmt.Errorf("type %s: %w", typeURL, err)
		}
		for i, raw := range items {
			msg := mt.New().Interface()
			if err := protojson.Unmarshal(raw, msg); err != nil {
				return nil, "", fmt.Errorf("%s[%d]: %w", typeURL, i, err)
			}
			res[typeURL] = append(res[typeURL], msg)
		}
	}
	snap, err := cache.NewSnapshot(b.Version, res)
	return snap, b.Version, err
}

// quietLogger passes go-control-plane's warnings and errors to stderr, not its debug chatter.
type quietLogger struct{}

func (quietLogger) Debugf(string, ...any)             {}
func (quietLogger) Infof(string, ...any)              {}
func (quietLogger) Warnf(format string, args ...any)  { log.Printf("warn: "+format, args...) }
func (quietLogger) Errorf(format string, args ...any) { log.Printf("error: "+format, args...) }

// serverTLS is the xDS server's TLS (Envoy Gateway serves xDS over mTLS): a certificate, and
// with a client CA, client certificates required and verified.
func serverTLS(certFile, keyFile, clientCA string) (credentials.TransportCredentials, error) {
	cert, err := tls.LoadX509KeyPair(certFile, keyFile)
	if err != nil {
		return nil, err
	}
	cfg := &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12}
	if clientCA != "" {
		pem, err := os.ReadFile(clientCA)
		if err != nil {
			return nil, err
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return nil, errors.New("no certificate in " + clientCA)
		}
		cfg.ClientCAs = pool
		cfg.ClientAuth = tls.RequireAndVerifyClientCert
	}
	return credentials.NewTLS(cfg), nil
}
