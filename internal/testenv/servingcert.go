package testenv

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"

	"sigs.k8s.io/controller-runtime/pkg/envtest"
)

// APIServerServingIPs makes kube-apiserver's serving certificate valid for
// ips besides 127.0.0.1 and localhost. envtest's names only the address it
// listens on, but a pod reaches the API server at the kubernetes Service's
// IP, and client-go's in-cluster configuration verifies it there ("x509:
// certificate is valid for 127.0.0.1, 10.253.0.1, not 10.0.0.1"). envtest
// writes no certificate into a directory that already has one, so the
// certificates, and the service account signing key it would write beside
// them, are written here first, into a directory removed with t.
func APIServerServingIPs(t testing.TB, ips ...string) Option {
	t.Helper()
	dir := t.TempDir()
	caPEM, err := writeServingCerts(dir, ips)
	if err != nil {
		t.Fatalf("kube-apiserver's certificates: %v", err)
	}
	return func(e *envtest.Environment) {
		s := e.ControlPlane.GetAPIServer()
		s.CertDir = dir
		s.SecureServing.CA = caPEM
	}
}

// writeServingCerts writes a CA, a serving certificate it signs
// (apiserver.crt, apiserver.key) and a service account key pair
// (sa-signer.crt, sa-signer.key), with envtest's file names, and returns
// the CA's certificate.
func writeServingCerts(dir string, ips []string) ([]byte, error) {
	caKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	now := time.Now()
	ca := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "podslo-testenv-ca"},
		NotBefore: now.Add(-time.Hour), NotAfter: now.Add(24 * time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
	}
	caDER, err := x509.CreateCertificate(rand.Reader, ca, ca, &caKey.PublicKey, caKey)
	if err != nil {
		return nil, err
	}
	caCert, err := x509.ParseCertificate(caDER)
	if err != nil {
		return nil, err
	}
	serving := &x509.Certificate{
		SerialNumber: big.NewInt(2), Subject: pkix.Name{CommonName: "kube-apiserver"},
		NotBefore: now.Add(-time.Hour), NotAfter: now.Add(24 * time.Hour),
		KeyUsage:    x509.KeyUsageDigitalSignature | x509.KeyUsageKeyEncipherment,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		DNSNames:    []string{"localhost"}, IPAddresses: []net.IP{net.ParseIP("127.0.0.1")},
	}
	for _, ip := range ips {
		serving.IPAddresses = append(serving.IPAddresses, net.ParseIP(ip))
	}
	servingCert, servingKey, err := signed(serving, caCert, caKey)
	if err != nil {
		return nil, err
	}
	sa := &x509.Certificate{
		SerialNumber: big.NewInt(3), Subject: pkix.Name{CommonName: "service-accounts"},
		NotBefore: now.Add(-time.Hour), NotAfter: now.Add(24 * time.Hour), KeyUsage: x509.KeyUsageDigitalSignature,
	}
	saCert, saKey, err := signed(sa, nil, nil)
	if err != nil {
		return nil, err
	}
	caPEM := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: caDER})
	for name, data := range map[string][]byte{
		"apiserver.crt": servingCert, "apiserver.key": servingKey, "sa-signer.crt": saCert, "sa-signer.key": saKey,
	} {
		if err := os.WriteFile(filepath.Join(dir, name), data, 0o600); err != nil {
			return nil, err
		}
	}
	return caPEM, nil
}

// signed makes a key and tmpl's certificate for it, signed by parent's key,
// or self-signed when parent is nil; both PEM-encoded.
func signed(tmpl, parent *x509.Certificate, parentKey *ecdsa.PrivateKey) (cert, key []byte, err error) {
	k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, nil, err
	}
	if parent == nil {
		parent, parentKey = tmpl, k
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, parent, &k.PublicKey, parentKey)
	if err != nil {
		return nil, nil, err
	}
	pkcs8, err := x509.MarshalPKCS8PrivateKey(k)
	if err != nil {
		return nil, nil, err
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: pkcs8}), nil
}
