// Command istio-harness plays istiod and pilot-agent for one Istio ingress gateway, with the real
// Istio code (istio.io/istio at the commit go.mod pins):
//   - istiod: istio.io/istio/pilot/test/xds FakeDiscoveryServer, Istio's own xDS test harness (the
//     real xDS server and generators over a fake Kubernetes client), serving ADS on the unix
//     socket the router bootstrap names (./etc/istio/proxy/XDS), with a Gateway (HTTPS with
//     credentialName, HTTP), VirtualService, ServiceEntries and DestinationRule (config.go) and
//     the credentialName Secret; secret authorization relaxed and every ADS stream authenticated
//     as the gateway's service account (istiod does so from the client certificate), so that
//     istiod's SDS serves the credentialName certificate.
//   - pilot-agent: the router bootstrap rendered by istio.io/istio/pkg/bootstrap from the
//     template the proxy image ships (tools/packaging/common/envoy_bootstrap.json, -template),
//     the SDS server pilot-agent runs for `sds-grpc`
//     (istio.io/istio/security/pkg/nodeagent/sds, file-mounted workload certificates), and the
//     proxy launched by istio.io/istio/pkg/envoy exactly as pilot-agent launches it.
//   - the echo and mirror backends (backend.go).
//
// Everything lives under -dir, the working directory of the harness and the proxy (the
// bootstrap's paths are relative, as in the proxy's container). -dump writes what istiod sends
// that proxy (listeners, clusters, routes, endpoints, secrets) as JSON. ProxyConfig carries seed
// 002's privateKeyProvider (CryptoMB, -cryptomb-poll-delay; empty for none), as the pod
// annotation proxy.istio.io/config does. Istio's feature flags come from the environment as in
// istiod (PILOT_ENABLE_METADATA_EXCHANGE, PILOT_ENABLE_ALPN_FILTER, ...).
//
// Exit status: the proxy's (1 when it failed), 0 after SIGTERM/SIGINT, 2 on a usage error,
// 3 when the harness itself failed.
package main

import (
	"flag"
	"fmt"
	"log"
	"net"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"
	"time"

	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/wrapperspb"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"

	meshconfig "istio.io/api/mesh/v1alpha1"
	"istio.io/istio/pilot/pkg/model"
	xdsfake "istio.io/istio/pilot/test/xds"
	"istio.io/istio/pkg/bootstrap"
	"istio.io/istio/pkg/bootstrap/platform"
	"istio.io/istio/pkg/config/mesh"
	"istio.io/istio/pkg/envoy"
	"istio.io/istio/pkg/security"
	"istio.io/istio/security/pkg/nodeagent/cache"
	"istio.io/istio/security/pkg/nodeagent/sds"
)

const (
	namespace      = "istio-system"
	serviceAccount = "istio-ingressgateway-service-account"
	podName        = "istio-ingressgateway-0"
	xdsSocket      = "./etc/istio/proxy/XDS"
)

type options struct {
	dir, proxy, template, dump, host, pollDelay  string
	httpPort, httpsPort, backendPort, mirrorPort int
	concurrency, fileFlushMinSizeKB              int
	logLevel, componentLogLevel                  string
	dumpOnly                                     bool
	debugAddr, metrics                           string
}

func main() {
	var o options
	flag.StringVar(&o.dir, "dir", "", "working directory of the harness and the proxy (required)")
	flag.StringVar(&o.proxy, "proxy", "", "the proxy binary pilot-agent launches (none: serve only)")
	flag.StringVar(&o.template, "template", "", "Istio's envoy_bootstrap.json (the proxy image's envoy_bootstrap_tmpl.json; default: envoy_bootstrap_tmpl.json beside the binary)")
	flag.StringVar(&o.dump, "dump", "", "directory to write what istiod sends the gateway, as JSON")
	flag.BoolVar(&o.dumpOnly, "dump-only", false, "exit after -dump")
	flag.StringVar(&o.metrics, "metrics-provider", "prometheus", "meshConfig defaultProviders.metrics (the Helm chart's prometheus; empty: none)")
	flag.StringVar(&o.debugAddr, "debug-addr", "127.0.0.1:15014", "address of istiod's debug endpoints (/debug/...; empty: none)")
	flag.StringVar(&o.host, "host", "www.example.com", "the Gateway's and VirtualService's host")
	flag.IntVar(&o.httpPort, "http-port", 18080, "the Gateway's HTTP server port")
	flag.IntVar(&o.httpsPort, "https-port", 18443, "the Gateway's HTTPS server port")
	flag.IntVar(&o.backendPort, "backend-port", 18081, "the echo backend's port on 127.0.0.1")
	flag.IntVar(&o.mirrorPort, "mirror-port", 18082, "the mirror backend's port on 127.0.0.1")
	flag.StringVar(&o.pollDelay, "cryptomb-poll-delay", "10ms", "ProxyConfig privateKeyProvider cryptomb pollDelay (empty: no privateKeyProvider)")
	flag.IntVar(&o.concurrency, "concurrency", 2, "ProxyConfig concurrency (--concurrency)")
	flag.IntVar(&o.fileFlushMinSizeKB, "file-flush-min-size-kb", 0, "ProxyConfig fileFlushMinSizeKb (--file-flush-min-size-kb when > 0)")
	flag.StringVar(&o.logLevel, "proxy-log-level", "warning", "pilot-agent --proxyLogLevel")
	flag.StringVar(&o.componentLogLevel, "proxy-component-log-level", "misc:error", "pilot-agent --proxyComponentLogLevel")
	descriptors := flag.String("write-descriptors", "", "write the Istio-only filter configurations' descriptors (crates/xds/descriptors/istio.bin) to this file and exit")
	flag.Parse()
	if *descriptors != "" {
		if err := writeDescriptors(*descriptors); err != nil {
			log.Fatalf("istio-harness: %v", err)
		}
		return
	}
	if o.template == "" {
		// scripts/setup-istio-harness puts the proxy image's template beside the binary.
		if exe, err := os.Executable(); err == nil {
			o.template = filepath.Join(filepath.Dir(exe), "envoy_bootstrap_tmpl.json")
		}
	}
	if o.dir == "" || flag.NArg() != 0 {
		flag.Usage()
		os.Exit(2)
	}
	log.SetFlags(log.LstdFlags | log.Lmicroseconds | log.LUTC)
	t := &failer{}
	code := run(o, t)
	t.runCleanups()
	os.Exit(code)
}

func run(o options, t *failer) int {
	template, err := os.ReadFile(o.template)
	if err != nil {
		t.Fatalf("bootstrap template: %v", err)
	}
	if err := os.MkdirAll(o.dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Chdir(o.dir); err != nil {
		t.Fatal(err)
	}
	spiffe := fmt.Sprintf("spiffe://cluster.local/ns/%s/sa/%s", namespace, serviceAccount)
	c, err := newCerts(o.host, spiffe)
	if err != nil {
		t.Fatalf("certificates: %v", err)
	}
	files := map[string][]byte{
		"ca.crt": c.caPEM, // for the clients: the CA of the gateway's certificate
		// The proxy image's bootstrap template, where pilot-agent looks for it.
		bootstrap.DefaultCfgDir: template,
		// The pod's labels, as the downward API mounts them: the Gateway selects istio=ingressgateway.
		"./etc/istio/pod/labels": []byte("app=\"istio-ingressgateway\"\nistio=\"ingressgateway\"\n"),
		// Workload certificates mounted as files: pilot-agent's SDS serves them (default, ROOTCA).
		security.WorkloadIdentityCertChainPath: c.workload.cert,
		security.WorkloadIdentityKeyPath:       c.workload.key,
		security.WorkloadIdentityRootCertPath:  c.caPEM,
	}
	for p, data := range files {
		if err := writeFile(p, data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	for _, d := range []string{filepath.Dir(xdsSocket), security.WorkloadIdentityPath} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}

	serveBackend(o.backendPort, &echoBackend{attempts: map[string]int{}}, t)
	serveBackend(o.mirrorPort, &mirrorBackend{}, t)

	pc := proxyConfig(o)
	node := nodeMetadata(o, pc, t)
	fake := istiod(o, c, t)
	log.Printf("istio-harness: istiod (FakeDiscoveryServer) serving ADS on %s", xdsSocket)
	if o.debugAddr != "" {
		serveDebug(o.debugAddr, fake.DiscoveryDebug, t)
	}

	out, err := bootstrap.New(bootstrap.Config{Node: node}).CreateFile()
	if err != nil {
		t.Fatalf("bootstrap: %v", err)
	}
	log.Printf("istio-harness: router bootstrap (pkg/bootstrap) at %s", out)
	if o.dump != "" {
		if err := dump(fake, node, out, o.dump); err != nil {
			t.Fatalf("dump: %v", err)
		}
		log.Printf("istio-harness: wrote what istiod sends into %s", o.dump)
		if o.dumpOnly {
			return 0
		}
	}

	sdsServer := pilotAgentSDS(pc, t)
	t.Cleanup(sdsServer.Stop)

	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGTERM, syscall.SIGINT)
	if o.proxy == "" {
		<-sig
		return 0
	}
	// pilot-agent's launch: cmd.go's envoy.ProxyConfig, back-filled as initializeEnvoyAgent does.
	proxy := envoy.NewProxy(envoy.ProxyConfig{
		LogLevel:           o.logLevel,
		ComponentLogLevel:  o.componentLogLevel,
		NodeIPs:            []string{"127.0.0.1"},
		Sidecar:            false,
		FileFlushInterval:  pc.FileFlushInterval,
		FileFlushMinSizeKB: pc.FileFlushMinSizeKb,
		BinaryPath:         o.proxy,
		ConfigPath:         out,
		AdminPort:          pc.ProxyAdminPort,
		DrainDuration:      pc.DrainDuration,
		Concurrency:        pc.Concurrency.GetValue(),
		SkipDeprecatedLogs: true, // ENVOY_SKIP_DEPRECATED_LOGS defaults to true
	})
	abort := make(chan error, 1)
	done := make(chan error, 1)
	go func() { done <- proxy.Run(abort) }()
	select {
	case s := <-sig:
		abort <- fmt.Errorf("harness got %v", s)
		<-done
		return 0
	case err := <-done:
		log.Printf("istio-harness: the proxy exited: %v", err)
		if err != nil {
			return 1
		}
		return 0
	}
}

// proxyConfig is pilot-agent's effective ProxyConfig for the gateway pod: mesh defaults, the
// paths of the proxy image, and seed 002's privateKeyProvider from the pod's
// proxy.istio.io/config annotation.
func proxyConfig(o options) *meshconfig.ProxyConfig {
	pc := mesh.DefaultProxyConfig()
	pc.ConfigPath = "./etc/istio/proxy"
	pc.Concurrency = wrapperspb.Int32(int32(o.concurrency))
	pc.FileFlushMinSizeKb = uint32(o.fileFlushMinSizeKB)
	pc.ClusterName = &meshconfig.ProxyConfig_ServiceCluster{ServiceCluster: "istio-ingressgateway." + namespace}
	if o.pollDelay != "" {
		d, err := time.ParseDuration(o.pollDelay)
		if err != nil {
			log.Fatalf("istio-harness: -cryptomb-poll-delay: %v", err)
		}
		pc.PrivateKeyProvider = &meshconfig.PrivateKeyProvider{
			Provider: &meshconfig.PrivateKeyProvider_Cryptomb{
				Cryptomb: &meshconfig.PrivateKeyProvider_CryptoMb{PollDelay: durationpb.New(d)},
			},
		}
	}
	return pc
}

// nodeMetadata is what pilot-agent's generateNodeMetadata computes for the gateway pod, from the
// environment the gateway injection template gives it.
func nodeMetadata(o options, pc *meshconfig.ProxyConfig, t *failer) *model.Node {
	envs := []string{
		"POD_NAME=" + podName,
		"POD_NAMESPACE=" + namespace,
		"INSTANCE_IP=127.0.0.1",
		"SERVICE_ACCOUNT=" + serviceAccount,
		"HOST_IP=127.0.0.1",
		"ISTIO_META_CLUSTER_ID=Kubernetes",
		"ISTIO_META_MESH_ID=cluster.local",
		"ISTIO_META_WORKLOAD_NAME=istio-ingressgateway",
		"ISTIO_META_OWNER=kubernetes://apis/apps/v1/namespaces/" + namespace + "/deployments/istio-ingressgateway",
		"ISTIO_META_UNPRIVILEGED_POD=true",
		"TRUST_DOMAIN=cluster.local",
	}
	id := fmt.Sprintf("router~127.0.0.1~%s.%s~%s.svc.cluster.local", podName, namespace, namespace)
	node, err := bootstrap.GetNodeMetaData(bootstrap.MetadataOptions{
		ID:                      id,
		Envs:                    envs,
		Platform:                &platform.Unknown{},
		InstanceIPs:             []string{"127.0.0.1"},
		ProxyConfig:             pc,
		EnvoyStatusPort:         15021,
		EnvoyPrometheusPort:     15090,
		EnvoySkipDeprecatedLogs: true,
	})
	if err != nil {
		t.Fatalf("node metadata: %v", err)
	}
	return node
}

// istiod starts FakeDiscoveryServer on the bootstrap's XDS socket.
func istiod(o options, c *certs, t *failer) *xdsfake.FakeDiscoveryServer {
	secret := &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: "gateway-cert", Namespace: namespace},
		Type:       corev1.SecretTypeTLS,
		Data:       map[string][]byte{"tls.crt": c.gateway.cert, "tls.key": c.gateway.key},
	}
	// The gateway's pod, as istiod sees it in Kubernetes: the proxy's workload labels (which select
	// the Gateway) come from it.
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: podName, Namespace: namespace, Labels: map[string]string{
			"app": "istio-ingressgateway", "istio": "ingressgateway",
		}},
		Spec: corev1.PodSpec{ServiceAccountName: serviceAccount},
		Status: corev1.PodStatus{
			Phase: corev1.PodRunning, PodIP: "127.0.0.1", PodIPs: []corev1.PodIP{{IP: "127.0.0.1"}},
			Conditions: []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue}},
		},
	}
	m := mesh.DefaultMeshConfig()
	m.AccessLogFile = "/dev/stdout" // as Istio's demo profile and most installs
	if o.metrics != "" {
		// The Helm chart's default (telemetry.v2.prometheus.enabled): the istio.stats filter.
		m.DefaultProviders.Metrics = []string{o.metrics}
	}
	fake := xdsfake.NewFakeDiscoveryServer(t, xdsfake.FakeOptions{
		ConfigString:               istioConfig(o.host, o.httpPort, o.httpsPort, o.backendPort, o.mirrorPort),
		KubernetesObjects:          []runtime.Object{secret, pod},
		MeshConfig:                 m,
		DisableSecretAuthorization: true,
		ListenerBuilder: func() (net.Listener, error) {
			_ = os.Remove(xdsSocket)
			return net.Listen("unix", xdsSocket)
		},
	})
	// istiod authenticates each ADS stream by its client certificate; the socket has none, so
	// every stream is the gateway's service account (its SDS then serves credentialName).
	// AuthPlaintext: authenticate streams without TLS too (Istio's own switch for this case).
	security.AuthPlaintext = true
	fake.Discovery.Authenticators = []security.Authenticator{gatewayIdentity{id: fmt.Sprintf(
		"spiffe://cluster.local/ns/%s/sa/%s", namespace, serviceAccount)}}
	return fake
}

type gatewayIdentity struct{ id string }

func (g gatewayIdentity) AuthenticatorType() string { return "istio-harness" }
func (g gatewayIdentity) Authenticate(security.AuthContext) (*security.Caller, error) {
	return &security.Caller{Identities: []string{g.id}}, nil
}

// pilotAgentSDS is pilot-agent's SDS server on the workload socket (the bootstrap's sds-grpc),
// with file-mounted workload certificates, as initSdsServer sets it up.
func pilotAgentSDS(pc *meshconfig.ProxyConfig, t *failer) *sds.Server {
	opts := &security.Options{
		RootCertFilePath:   security.WorkloadIdentityRootCertPath,
		CertChainFilePath:  security.WorkloadIdentityCertChainPath,
		KeyFilePath:        security.WorkloadIdentityKeyPath,
		FileMountedCerts:   true,
		WorkloadRSAKeySize: 2048,
		SecretTTL:          24 * time.Hour,
		TrustDomain:        "cluster.local",
	}
	cache, err := cache.NewSecretManagerClient(nil, opts)
	if err != nil {
		t.Fatalf("SDS secret manager: %v", err)
	}
	t.Cleanup(cache.Close)
	s := sds.NewServer(opts, cache, pc.GetPrivateKeyProvider())
	cache.RegisterSecretHandler(s.OnSecretUpdate)
	log.Printf("istio-harness: pilot-agent's SDS server on %s", security.GetIstioSDSServerSocketPath())
	return s
}
