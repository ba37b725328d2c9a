package apiclient

import "testing"

func TestResolveAddrTLS(t *testing.T) {
	env := func(m map[string]string) func(string) string { return func(k string) string { return m[k] } }
	for _, tt := range []struct {
		flag  string
		env   map[string]string
		tlsOn bool
		want  string
	}{
		{"", nil, false, "http://127.0.0.1:7401"},
		{"", nil, true, "https://127.0.0.1:7401"},
		{"10.0.0.1:7401", nil, true, "https://10.0.0.1:7401"},
		{":7401", nil, true, "https://127.0.0.1:7401"},
		{"http://10.0.0.1:7401", nil, true, "http://10.0.0.1:7401"}, // an explicit scheme wins
		{"", map[string]string{"FAK_ADDR": "https://n1:7401"}, false, "https://n1:7401"},
		{"", map[string]string{"FAK_ADDR": "n1:7401"}, true, "https://n1:7401"},
	} {
		got, err := ResolveAddrTLS(tt.flag, env(tt.env), tt.tlsOn)
		if err != nil || got != tt.want {
			t.Errorf("ResolveAddrTLS(%q, %v, %v) = %q, %v; want %q", tt.flag, tt.env, tt.tlsOn, got, err, tt.want)
		}
	}
}

func TestResolveTLS(t *testing.T) {
	env := map[string]string{EnvCACert: "/env/ca.pem", EnvClientCert: "/env/c.pem", EnvClientKey: "/env/k.pem"}
	got := ResolveTLS(TLSFiles{CA: "/flag/ca.pem"}, func(k string) string { return env[k] })
	want := TLSFiles{CA: "/flag/ca.pem", Cert: "/env/c.pem", Key: "/env/k.pem"}
	if got != want {
		t.Fatalf("ResolveTLS = %+v, want %+v", got, want)
	}
	if cfg, err := (TLSFiles{}).Config(); cfg != nil || err != nil {
		t.Fatalf("no files: %v, %v; want nil, nil", cfg, err)
	}
	if _, err := (TLSFiles{Cert: "/c.pem"}).Config(); err == nil {
		t.Fatal("a certificate without its key was accepted")
	}
}
