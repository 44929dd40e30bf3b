// Package manifests reads multi-document YAML (or JSON) streams, as
// kustomize, helm template and the release's install.yaml print them, into
// objects.
package manifests

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os/exec"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
)

// Decode returns the objects of data, in order, skipping empty documents.
func Decode(data []byte) ([]*unstructured.Unstructured, error) {
	var objs []*unstructured.Unstructured
	dec := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(data), 4096)
	for {
		u := &unstructured.Unstructured{}
		err := dec.Decode(&u.Object)
		if errors.Is(err, io.EOF) {
			return objs, nil
		}
		if err != nil {
			return nil, fmt.Errorf("document %d: %w", len(objs)+1, err)
		}
		if len(u.Object) > 0 {
			objs = append(objs, u)
		}
	}
}

// Render runs the render script (hack/render.sh: config/default as make
// deploy applies it) with image and returns its objects.
func Render(script, image string) ([]*unstructured.Unstructured, error) {
	var stderr bytes.Buffer
	cmd := exec.Command(script, image)
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return nil, fmt.Errorf("%s: %w\n%s", script, err, stderr.String())
	}
	return Decode(out)
}
