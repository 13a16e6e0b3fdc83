package main

import (
	"context"
	"sync"

	"google.golang.org/grpc"
	"google.golang.org/grpc/metadata"

	core "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	discovery "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
)

// status implements go-control-plane's server.Callbacks: it records, per node and type URL,
// what was sent, ACKed and NACKed, for GET /status. GET /status returns
//
//	{"nodes": {"<node id>": {
//	   "pushed_version": "v2",                     // last PUT /snapshot for the node
//	   "streams_open": {"sotw": 1, "delta": 0},    // streams whose first request named the node
//	   "streams_opened_total": 1,
//	   "types": {"<type_url>": {
//	      "requests": 3, "responses": 2, "acks": 1, "nacks": 1,
//	      "last_sent_version": "v2", "last_acked_version": "v1",
//	      "last_nack": {"version": "v2", "message": "..."} | null,
//	      "nack_resends_suppressed": 1}}}},
//	 "stream_metadata": {"<gRPC method>": {"<key>": ["<value>", ...]}}}
//
// stream_metadata is the request metadata (headers) of the last stream opened per full gRPC
// method, e.g. "/envoy.service.secret.v3.SecretDiscoveryService/StreamSecrets": what a data
// plane sends from its grpc_services[].initial_metadata.
//
// A request with error_detail is a NACK; its "version" is the version of the response it
// rejects (found by its response_nonce), not its version_info (the last accepted one).
//
// go-control-plane issue 962: in state-of-the-world mode a NACK carries version_info = the
// last version the client accepted, which differs from the snapshot's, so the snapshot cache
// answers at once with the very version that was just rejected, and the client NACKs it again,
// forever. OnStreamRequest handles it: when a NACK's response_nonce is that of the last
// response sent on the stream for its type, it rewrites the request's version_info (the same
// request object the server hands to the cache's CreateWatch next) to the rejected version.
// If the snapshot is still at that version the cache parks the watch until a new snapshot is
// pushed; if a newer snapshot arrived meanwhile, the cache sends that at once. Delta streams do
// not need it (the delta cache resends only resources whose hash changed).
type status struct {
	mu       sync.Mutex
	nodes    map[string]*nodeStatus
	streams  map[streamKey]*streamInfo
	metadata map[string]metadata.MD
}

type nodeStatus struct {
	PushedVersion string                 `json:"pushed_version"`
	StreamsOpen   map[string]int         `json:"streams_open"`
	StreamsTotal  int                    `json:"streams_opened_total"`
	Types         map[string]*typeStatus `json:"types"`
}

type typeStatus struct {
	Requests         int    `json:"requests"`
	Responses        int    `json:"responses"`
	Acks             int    `json:"acks"`
	Nacks            int    `json:"nacks"`
	LastSentVersion  string `json:"last_sent_version"`
	LastAckedVersion string `json:"last_acked_version"`
	LastNack         *nack  `json:"last_nack"`
	Suppressed       int    `json:"nack_resends_suppressed"`
}

type nack struct {
	Version string `json:"version"`
	Message string `json:"message"`
}

// The sotw and delta servers number their streams separately.
type streamKey struct {
	delta bool
	id    int64
}

type streamInfo struct {
	node string
	sent map[string]sent // by type URL: the last response
}

type sent struct{ nonce, version string }

func newStatus() *status {
	return &status{
		nodes:    map[string]*nodeStatus{},
		streams:  map[streamKey]*streamInfo{},
		metadata: map[string]metadata.MD{},
	}
}

// recordMetadata is a gRPC stream interceptor: it keeps the stream's request metadata under
// its method, then serves the stream.
func (s *status) recordMetadata(srv any, ss grpc.ServerStream, info *grpc.StreamServerInfo, handler grpc.StreamHandler) error {
	if md, ok := metadata.FromIncomingContext(ss.Context()); ok {
		s.mu.Lock()
		s.metadata[info.FullMethod] = md.Copy()
		s.mu.Unlock()
	}
	return handler(srv, ss)
}

func (s *status) node(id string) *nodeStatus {
	n, ok := s.nodes[id]
	if !ok {
		n = &nodeStatus{StreamsOpen: map[string]int{"sotw": 0, "delta": 0}, Types: map[string]*typeStatus{}}
		s.nodes[id] = n
	}
	return n
}

func (s *status) typ(node, typeURL string) *typeStatus {
	n := s.node(node)
	t, ok := n.Types[typeURL]
	if !ok {
		t = &typeStatus{}
		n.Types[typeURL] = t
	}
	return t
}

func (s *status) setPushed(node, version string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.node(node).PushedVersion = version
}

// snapshotJSON is a deep enough copy of the state to encode without the lock.
func (s *status) snapshotJSON() map[string]any {
	s.mu.Lock()
	defer s.mu.Unlock()
	nodes := map[string]any{}
	for id, n := range s.nodes {
		types := map[string]typeStatus{}
		for u, t := range n.Types {
			types[u] = *t
		}
		open := map[string]int{"sotw": n.StreamsOpen["sotw"], "delta": n.StreamsOpen["delta"]}
		nodes[id] = map[string]any{
			"pushed_version": n.PushedVersion, "streams_open": open,
			"streams_opened_total": n.StreamsTotal, "types": types,
		}
	}
	md := map[string]metadata.MD{}
	for m, v := range s.metadata {
		md[m] = v.Copy()
	}
	return map[string]any{"nodes": nodes, "stream_metadata": md}
}

func kind(delta bool) string {
	if delta {
		return "delta"
	}
	return "sotw"
}

func (s *status) open(k streamKey) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.streams[k] = &streamInfo{sent: map[string]sent{}}
}

func (s *status) closed(k streamKey) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if st, ok := s.streams[k]; ok && st.node != "" {
		s.node(st.node).StreamsOpen[kind(k.delta)]--
	}
	delete(s.streams, k)
}

// request records one request and classifies it; it returns the version of the response a
// NACK rejects ("" when not a NACK of the last response on this stream).
func (s *status) request(k streamKey, node *core.Node, typeURL, version, nonce string, errDetail string, isNack bool) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	st, ok := s.streams[k]
	if !ok {
		return ""
	}
	if st.node == "" {
		st.node = node.GetId()
		n := s.node(st.node)
		n.StreamsOpen[kind(k.delta)]++
		n.StreamsTotal++
	}
	t := s.typ(st.node, typeURL)
	t.Requests++
	last := st.sent[typeURL]
	switch {
	case isNack:
		t.Nacks++
		rejected := version
		if nonce != "" && nonce == last.nonce {
			rejected = last.version
		}
		t.LastNack = &nack{Version: rejected, Message: errDetail}
		if nonce != "" && nonce == last.nonce {
			return last.version
		}
	case nonce != "":
		t.Acks++
		if k.delta {
			version = last.version // delta requests carry no version: the nonce names it
		}
		t.LastAckedVersion = version
	}
	return ""
}

func (s *status) response(k streamKey, typeURL, version, nonce string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	st, ok := s.streams[k]
	if !ok {
		return
	}
	st.sent[typeURL] = sent{nonce: nonce, version: version}
	t := s.typ(st.node, typeURL)
	t.Responses++
	t.LastSentVersion = version
}

func (s *status) suppressed(k streamKey, typeURL string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if st, ok := s.streams[k]; ok {
		s.typ(st.node, typeURL).Suppressed++
	}
}

// server.Callbacks

func (s *status) OnStreamOpen(_ context.Context, id int64, _ string) error {
	s.open(streamKey{false, id})
	return nil
}
func (s *status) OnStreamClosed(id int64, _ *core.Node) { s.closed(streamKey{false, id}) }

func (s *status) OnStreamRequest(id int64, req *discovery.DiscoveryRequest) error {
	k := streamKey{false, id}
	isNack := req.GetErrorDetail() != nil
	rejected := s.request(k, req.GetNode(), req.GetTypeUrl(), req.GetVersionInfo(), req.GetResponseNonce(),
		req.GetErrorDetail().GetMessage(), isNack)
	if rejected != "" && rejected != req.GetVersionInfo() {
		// Issue 962, see above: the cache now resends only a version newer than the rejected one.
		req.VersionInfo = rejected
		s.suppressed(k, req.GetTypeUrl())
	}
	return nil
}

func (s *status) OnStreamResponse(_ context.Context, id int64, _ *discovery.DiscoveryRequest, resp *discovery.DiscoveryResponse) {
	s.response(streamKey{false, id}, resp.GetTypeUrl(), resp.GetVersionInfo(), resp.GetNonce())
}

func (s *status) OnDeltaStreamOpen(_ context.Context, id int64, _ string) error {
	s.open(streamKey{true, id})
	return nil
}
func (s *status) OnDeltaStreamClosed(id int64, _ *core.Node) { s.closed(streamKey{true, id}) }

func (s *status) OnStreamDeltaRequest(id int64, req *discovery.DeltaDiscoveryRequest) error {
	s.request(streamKey{true, id}, req.GetNode(), req.GetTypeUrl(), "", req.GetResponseNonce(),
		req.GetErrorDetail().GetMessage(), req.GetErrorDetail() != nil)
	return nil
}

func (s *status) OnStreamDeltaResponse(id int64, _ *discovery.DeltaDiscoveryRequest, resp *discovery.DeltaDiscoveryResponse) {
	s.response(streamKey{true, id}, resp.GetTypeUrl(), resp.GetSystemVersionInfo(), resp.GetNonce())
}

func (s *status) OnFetchRequest(context.Context, *discovery.DiscoveryRequest) error         { return nil }
func (s *status) OnFetchResponse(*discovery.DiscoveryRequest, *discovery.DiscoveryResponse) {}
