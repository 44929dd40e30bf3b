// Package plugins holds the krew manifest template of the kubectl plugin
// (widgethub.yaml.tmpl) and its test; it has no Go code of its own.
//
// make release (hack/release.sh) writes plugins/widgethub.yaml from the
// template: one platform per plugin archive it builds (linux and darwin,
// amd64 and arm64), each with the archive's release URI and sha256. The test
// runs the release script into a temporary directory and checks the
// manifest against the archives it wrote, the archives' binaries, and the
// release's other artifacts.
package plugins
