package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"

	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/anypb"

	"istio.io/istio/pilot/pkg/model"
	v3 "istio.io/istio/pilot/pkg/xds/v3"
	xdsfake "istio.io/istio/pilot/test/xds"
	"istio.io/istio/pkg/spiffe"
	"istio.io/istio/pkg/util/sets"
)

// dump writes what istiod generates for the gateway node into dir: listeners.json,
// clusters.json, routes.json, endpoints.json and secrets.json, each a list of resources, with
// the resources as Envoy's JSON (mustJSON), and node.json (the bootstrap's node
// metadata) and bootstrap.json (the rendered router bootstrap).
func dump(fake *xdsfake.FakeDiscoveryServer, node *model.Node, bootstrapPath, dir string) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	p, err := model.ParseServiceNodeWithMetadata(node.ID, &node.Metadata.NodeMetadata)
	if err != nil {
		return err
	}
	// As the xDS server's initProxyMetadata does for a connecting proxy.
	p.Labels = node.Metadata.Labels
	p.ConfigNamespace = node.Metadata.Namespace
	p.VerifiedIdentity = &spiffe.Identity{TrustDomain: "cluster.local", Namespace: namespace, ServiceAccount: serviceAccount}
	p = fake.SetupProxy(p)

	var listeners, clusters, routes, endpoints []proto.Message
	ls := fake.Listeners(p)
	for _, l := range ls {
		listeners = append(listeners, l)
	}
	for _, c := range fake.Clusters(p) {
		clusters = append(clusters, c)
	}
	for _, r := range fake.RoutesFromListeners(p, ls) {
		routes = append(routes, r)
	}
	for _, e := range fake.Endpoints(p) {
		endpoints = append(endpoints, e)
	}
	var secrets []proto.Message
	names := secretNames(string(mustJSON(listeners)))
	gen := fake.Discovery.Generators[v3.SecretType]
	res, _, err := gen.Generate(p, &model.WatchedResource{TypeUrl: v3.SecretType, ResourceNames: sets.New(names...)},
		&model.PushRequest{Forced: true, Push: fake.PushContext()})
	if err != nil {
		return fmt.Errorf("secrets: %v", err)
	}
	for _, r := range res {
		m, err := r.Resource.UnmarshalNew()
		if err != nil {
			return err
		}
		secrets = append(secrets, m)
	}
	for name, ms := range map[string][]proto.Message{
		"listeners.json": listeners, "clusters.json": clusters, "routes.json": routes,
		"endpoints.json": endpoints, "secrets.json": secrets,
	} {
		if err := os.WriteFile(filepath.Join(dir, name), mustJSON(ms), 0o644); err != nil {
			return err
		}
	}
	b, err := os.ReadFile(bootstrapPath)
	if err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(dir, "bootstrap.json"), b, 0o644); err != nil {
		return err
	}
	meta, err := bootstrapNodeJSON(node)
	if err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(dir, "node.json"), meta, 0o644)
}

// mustJSON renders messages as a JSON list, each with its "@type", in proto field names (as
// Envoy's admin /config_dump shows resources, and as testdata/envoy-gateway holds them).
func mustJSON(ms []proto.Message) []byte {
	opts := protojson.MarshalOptions{UseProtoNames: true}
	var b strings.Builder
	b.WriteString("[")
	for i, m := range ms {
		var s string
		a, err := anypb.New(m)
		if err == nil {
			var out []byte
			if out, err = opts.Marshal(a); err == nil {
				// protojson's spacing varies on purpose; encoding/json's does not.
				var ind bytes.Buffer
				if err = json.Indent(&ind, out, "", " "); err == nil {
					s = ind.String()
				}
			}
		}
		if err != nil {
			s = fmt.Sprintf("{\"error\": %q}", err.Error())
		}
		if i > 0 {
			b.WriteString(",")
		}
		b.WriteString("\n" + s)
	}
	b.WriteString("\n]\n")
	return []byte(b.String())
}

// secretNames are the SDS resource names the listeners refer to ("kubernetes://..." and the like).
func secretNames(listenersJSON string) []string {
	var out []string
	for _, m := range sdsName.FindAllStringSubmatch(listenersJSON, -1) {
		out = append(out, m[1])
	}
	return sets.New(out...).UnsortedList()
}

var sdsName = regexp.MustCompile(`"name":\s*"([^"]+)",\s*"sds_config"`)

func bootstrapNodeJSON(node *model.Node) ([]byte, error) {
	return json.MarshalIndent(map[string]any{"id": node.ID, "metadata": node.Metadata}, "", " ")
}
