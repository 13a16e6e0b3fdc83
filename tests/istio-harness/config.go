package main

import "fmt"

// istioConfig is what a user of an Istio ingress gateway writes: a Gateway (HTTPS with a
// credentialName certificate, and HTTP), a VirtualService (header manipulation, retries, a
// timeout, mirroring), ServiceEntries for the echo and mirror backends on 127.0.0.1 and a
// DestinationRule (connection pool, outlier detection, load balancing). All in istio-system,
// the gateway's namespace.
func istioConfig(host string, httpPort, httpsPort, backendPort, mirrorPort int) string {
	return fmt.Sprintf(`apiVersion: networking.istio.io/v1
kind: Gateway
metadata:
  name: gateway
  namespace: istio-system
spec:
  selector:
    istio: ingressgateway
  servers:
  - port: {number: %[3]d, name: https, protocol: HTTPS}
    hosts: ["%[1]s"]
    tls:
      mode: SIMPLE
      credentialName: gateway-cert
  - port: {number: %[2]d, name: http, protocol: HTTP}
    hosts: ["%[1]s"]
---
%[4]s
---
%[5]s
---
apiVersion: networking.istio.io/v1
kind: DestinationRule
metadata:
  name: backend
  namespace: istio-system
spec:
  host: backend.example.internal
  trafficPolicy:
    loadBalancer: {simple: ROUND_ROBIN}
    connectionPool:
      tcp: {maxConnections: 100, connectTimeout: 5s}
      http: {http1MaxPendingRequests: 100, maxRetries: 10, idleTimeout: 60s, maxRequestsPerConnection: 100}
    outlierDetection:
      consecutive5xxErrors: 100
      interval: 10s
      baseEjectionTime: 30s
    tls: {mode: DISABLE}
---
apiVersion: networking.istio.io/v1
kind: VirtualService
metadata:
  name: app
  namespace: istio-system
spec:
  hosts: ["%[1]s"]
  gateways: [gateway]
  http:
  - name: retry
    match: [{uri: {prefix: /retry/}}]
    retries: {attempts: 3, perTryTimeout: 2s, retryOn: 5xx}
    route: [{destination: {host: backend.example.internal, port: {number: 8080}}}]
  - name: slow
    match: [{uri: {prefix: /slow}}]
    timeout: 1s
    retries: {attempts: 0}
    route: [{destination: {host: backend.example.internal, port: {number: 8080}}}]
  - name: mirror
    match: [{uri: {prefix: /mirror}}]
    mirror: {host: mirror.example.internal, port: {number: 8080}}
    mirrorPercentage: {value: 100}
    route: [{destination: {host: backend.example.internal, port: {number: 8080}}}]
  - name: app
    match: [{uri: {prefix: /app}}]
    headers:
      request:
        set: {x-istio-set: set-by-virtualservice}
        add: {x-istio-add: added-by-virtualservice}
        remove: [x-remove-me]
      response:
        set: {x-istio-response: set-by-virtualservice}
        remove: [x-backend-remove]
    route: [{destination: {host: backend.example.internal, port: {number: 8080}}}]
`, host, httpPort, httpsPort,
		serviceEntry("backend", backendPort), serviceEntry("mirror", mirrorPort))
}

// serviceEntry is a MESH_EXTERNAL HTTP service NAME.example.internal, port 8080, whose one
// endpoint is 127.0.0.1:port.
func serviceEntry(name string, port int) string {
	return fmt.Sprintf(`apiVersion: networking.istio.io/v1
kind: ServiceEntry
metadata:
  name: %[1]s
  namespace: istio-system
spec:
  hosts: [%[1]s.example.internal]
  location: MESH_EXTERNAL
  ports:
  - {number: 8080, name: http, protocol: HTTP}
  resolution: STATIC
  endpoints:
  - address: 127.0.0.1
    ports: {http: %[2]d}`, name, port)
}
