package main

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestRun(t *testing.T) {
	dir := t.TempDir()
	for member, server := range map[string]string{"alpha": "https://127.0.0.1:6443", "beta": "https://10.0.0.2:6443"} {
		if err := os.MkdirAll(filepath.Join(dir, member), 0o700); err != nil {
			t.Fatal(err)
		}
		must(t, os.WriteFile(filepath.Join(dir, member, "server"), []byte(server+"\n"), 0o600))
		must(t, os.WriteFile(filepath.Join(dir, member, "token"), []byte("token-of-"+member+"\n"), 0o600))
	}
	info := func(server, config string) string {
		cluster := map[string]any{"server": server}
		if config != "" {
			cluster["config"] = json.RawMessage(config)
		}
		b, _ := json.Marshal(map[string]any{"apiVersion": "client.authentication.k8s.io/v1", "kind": "ExecCredential",
			"spec": map[string]any{"interactive": false, "cluster": cluster}})
		return string(b)
	}
	for _, tc := range []struct {
		name      string
		args      []string
		info      string
		wantToken string // "" means an error
	}{
		{"member from the extension", nil, info("https://127.0.0.1:6443", `{"member":"alpha"}`), "token-of-alpha"},
		{"member from the flag", []string{"--member=beta"}, info("https://10.0.0.2:6443", ""), "token-of-beta"},
		{"another server for the member", nil, info("https://attacker.example:443", `{"member":"alpha"}`), ""},
		{"beta's server naming alpha", nil, info("https://10.0.0.2:6443", `{"member":"alpha"}`), ""},
		{"a path for a member", nil, info("https://127.0.0.1:6443", `{"member":"../alpha"}`), ""},
		{"an unknown member", nil, info("https://127.0.0.1:6443", `{"member":"gamma"}`), ""},
		{"no member", nil, info("https://127.0.0.1:6443", ""), ""},
		{"no cluster information", nil, `{"apiVersion":"client.authentication.k8s.io/v1","kind":"ExecCredential","spec":{}}`, ""},
		{"no exec info", nil, "", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var out bytes.Buffer
			err := run(append([]string{"--token-dir=" + dir}, tc.args...), tc.info, &out)
			if tc.wantToken == "" {
				if err == nil {
					t.Fatalf("handed out %s", out.String())
				}
				if strings.Contains(err.Error(), "token-of") {
					t.Fatalf("error shows a token: %v", err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			var cred struct {
				APIVersion, Kind string
				Status           struct{ Token string }
			}
			must(t, json.Unmarshal(out.Bytes(), &cred))
			if cred.Status.Token != tc.wantToken || cred.Kind != "ExecCredential" || cred.APIVersion != "client.authentication.k8s.io/v1" {
				t.Fatalf("got %+v", cred)
			}
		})
	}
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}
