package testenv

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"io"
	"math/big"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"golang.org/x/crypto/bcrypt"
)

// WebConfig is an exporter-toolkit web config (--web.config.file) written
// for one test.
type WebConfig struct {
	// Path is the web config file.
	Path string
	// Client trusts the test's CA and nothing else.
	Client *http.Client
}

// WriteWebConfig writes into a fresh directory a CA, a certificate for
// 127.0.0.1 signed by it, and a web config that serves the certificate and
// requires basic auth from users (name to password, stored as bcrypt
// hashes as an operator would).
func WriteWebConfig(t testing.TB, users map[string]string) WebConfig {
	t.Helper()
	dir := t.TempDir()
	now := time.Now()

	caKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatalf("generate CA key: %v", err)
	}
	caTmpl := &x509.Certificate{
		SerialNumber:          big.NewInt(1),
		Subject:               pkix.Name{CommonName: "podslo test CA"},
		NotBefore:             now.Add(-time.Hour),
		NotAfter:              now.Add(24 * time.Hour),
		IsCA:                  true,
		BasicConstraintsValid: true,
		KeyUsage:              x509.KeyUsageCertSign,
	}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		t.Fatalf("create CA certificate: %v", err)
	}
	ca, err := x509.ParseCertificate(caDER)
	if err != nil {
		t.Fatalf("parse CA certificate: %v", err)
	}

	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatalf("generate server key: %v", err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(2),
		Subject:      pkix.Name{CommonName: "podslo"},
		IPAddresses:  []net.IP{net.IPv4(127, 0, 0, 1)},
		NotBefore:    now.Add(-time.Hour),
		NotAfter:     now.Add(24 * time.Hour),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca, &key.PublicKey, caKey)
	if err != nil {
		t.Fatalf("create server certificate: %v", err)
	}
	keyDER, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		t.Fatalf("marshal server key: %v", err)
	}
	writePEM(t, filepath.Join(dir, "tls.crt"), "CERTIFICATE", der)
	writePEM(t, filepath.Join(dir, "tls.key"), "EC PRIVATE KEY", keyDER)

	// Relative paths, as in a mounted Secret: exporter-toolkit resolves them
	// against the web config's directory.
	var cfg strings.Builder
	cfg.WriteString("tls_server_config:\n  cert_file: tls.crt\n  key_file: tls.key\n")
	if len(users) > 0 {
		cfg.WriteString("basic_auth_users:\n")
	}
	for name, password := range users {
		// The lowest cost keeps tests fast; the server accepts any cost.
		hash, err := bcrypt.GenerateFromPassword([]byte(password), bcrypt.MinCost)
		if err != nil {
			t.Fatalf("hash password of %q: %v", name, err)
		}
		fmt.Fprintf(&cfg, "  %q: %q\n", name, hash)
	}
	path := filepath.Join(dir, "web-config.yml")
	if err := os.WriteFile(path, []byte(cfg.String()), 0o600); err != nil {
		t.Fatalf("write web config: %v", err)
	}

	roots := x509.NewCertPool()
	roots.AddCert(ca)
	tr := &http.Transport{TLSClientConfig: &tls.Config{RootCAs: roots, MinVersion: tls.VersionTLS12}}
	t.Cleanup(tr.CloseIdleConnections)
	return WebConfig{Path: path, Client: &http.Client{Transport: tr, Timeout: 30 * time.Second}}
}

func writePEM(t testing.TB, path, typ string, der []byte) {
	t.Helper()
	if err := os.WriteFile(path, pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der}), 0o600); err != nil {
		t.Fatalf("write %s: %v", path, err)
	}
}

// Get fetches url with c, with basic auth when user is not empty, and
// returns the status code and the body.
func Get(c *http.Client, url, user, password string) (int, string, error) {
	req, err := http.NewRequest(http.MethodGet, url, nil)
	if err != nil {
		return 0, "", err
	}
	if user != "" {
		req.SetBasicAuth(user, password)
	}
	resp, err := c.Do(req)
	if err != nil {
		return 0, "", err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	return resp.StatusCode, string(body), err
}
