package main

import (
	"os"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protodesc"
	"google.golang.org/protobuf/types/descriptorpb"

	alpn "istio.io/api/envoy/config/filter/http/alpn/v2alpha1"
	stats "istio.io/api/envoy/extensions/stats"
)

// writeDescriptors writes the descriptors of the Istio-only HTTP filter configurations istiod
// puts in a gateway's listeners (istio.alpn's FilterConfig, istio.stats' PluginConfig), as a
// FileDescriptorSet, for quickshake's xDS decoder (crates/xds/descriptors/istio.bin). Their
// files are renamed under istio/api/ so that they cannot collide with Envoy's; they import only
// google/protobuf/duration.proto, which Envoy's set has.
func writeDescriptors(path string) error {
	set := &descriptorpb.FileDescriptorSet{}
	for _, f := range []*descriptorpb.FileDescriptorProto{
		protodesc.ToFileDescriptorProto(alpn.File_envoy_config_filter_http_alpn_v2alpha1_config_proto),
		protodesc.ToFileDescriptorProto(stats.File_envoy_extensions_stats_config_proto),
	} {
		f.Name = proto.String("istio/api/" + f.GetName())
		f.SourceCodeInfo = nil
		set.File = append(set.File, f)
	}
	b, err := proto.MarshalOptions{Deterministic: true}.Marshal(set)
	if err != nil {
		return err
	}
	return os.WriteFile(path, b, 0o644)
}
