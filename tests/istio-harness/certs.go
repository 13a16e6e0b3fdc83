package main

import (
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net/url"
	"os"
	"path/filepath"
	"time"
)

// pair is a PEM certificate chain and its PEM private key.
type pair struct{ cert, key []byte }

// certs holds what the harness signs: a CA, the gateway's certificate (the credentialName
// Secret; RSA, so that CryptoMB signs with it) and the workload certificate pilot-agent's SDS
// server would hold (file-mounted certificates, served as `default` and `ROOTCA`).
type certs struct {
	caPEM    []byte
	gateway  pair
	workload pair
}

func newCerts(host, spiffe string) (*certs, error) {
	caKey, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		return nil, err
	}
	now := time.Now()
	caTmpl := &x509.Certificate{
		SerialNumber:          big.NewInt(1),
		Subject:               pkix.Name{CommonName: "istio-harness CA", Organization: []string{"cluster.local"}},
		NotBefore:             now.Add(-time.Hour),
		NotAfter:              now.Add(30 * 24 * time.Hour),
		IsCA:                  true,
		BasicConstraintsValid: true,
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageCRLSign,
	}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		return nil, err
	}
	ca, err := x509.ParseCertificate(caDER)
	if err != nil {
		return nil, err
	}
	leaf := func(serial int64, tmpl *x509.Certificate) (pair, error) {
		key, err := rsa.GenerateKey(rand.Reader, 2048)
		if err != nil {
			return pair{}, err
		}
		tmpl.SerialNumber = big.NewInt(serial)
		tmpl.NotBefore = now.Add(-time.Hour)
		tmpl.NotAfter = now.Add(30 * 24 * time.Hour)
		tmpl.KeyUsage = x509.KeyUsageDigitalSignature | x509.KeyUsageKeyEncipherment
		tmpl.ExtKeyUsage = []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth}
		der, err := x509.CreateCertificate(rand.Reader, tmpl, ca, &key.PublicKey, caKey)
		if err != nil {
			return pair{}, err
		}
		return pair{
			cert: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}),
			key:  pem.EncodeToMemory(&pem.Block{Type: "RSA PRIVATE KEY", Bytes: x509.MarshalPKCS1PrivateKey(key)}),
		}, nil
	}
	gw, err := leaf(2, &x509.Certificate{Subject: pkix.Name{CommonName: host}, DNSNames: []string{host}})
	if err != nil {
		return nil, err
	}
	id, err := url.Parse(spiffe)
	if err != nil {
		return nil, err
	}
	wl, err := leaf(3, &x509.Certificate{URIs: []*url.URL{id}})
	if err != nil {
		return nil, err
	}
	return &certs{
		caPEM:    pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: caDER}),
		gateway:  gw,
		workload: wl,
	}, nil
}

// writeFile writes data at path (relative to the harness's working directory), making its
// parent directories.
func writeFile(path string, data []byte, mode os.FileMode) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	return os.WriteFile(path, data, mode)
}
