package manifests_test

import (
	"strings"
	"testing"

	"github.com/widgethub/widgethub/internal/manifests"
)

func TestDecode(t *testing.T) {
	objs, err := manifests.Decode([]byte("---\n# a comment only\n---\napiVersion: v1\nkind: Namespace\nmetadata:\n  name: a\n---\n{\"apiVersion\": \"v1\", \"kind\": \"ServiceAccount\", \"metadata\": {\"name\": \"b\"}}\n"))
	if err != nil {
		t.Fatal(err)
	}
	if len(objs) != 2 || objs[0].GetKind() != "Namespace" || objs[0].GetName() != "a" || objs[1].GetKind() != "ServiceAccount" {
		t.Errorf("Decode = %v", objs)
	}
	if _, err := manifests.Decode([]byte("kind: A\n---\nkind: [\n")); err == nil || !strings.Contains(err.Error(), "document 2") {
		t.Errorf("Decode of a broken second document: %v", err)
	}
}
