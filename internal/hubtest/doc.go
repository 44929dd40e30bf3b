// Package hubtest is the kit of the test suites that run widgethub against
// a hub and members of package fleet (cmd/widgethub/app's, which runs the
// whole manager, and providers/members', which runs the engine): registering
// members and waiting for their MemberClusters, building the kubeconfigs and
// proxies of registrations, making Widgets and reading their Deployments,
// reading the in-process metrics, and the goroutine and text checks.
//
// A suite calls Use with its fleet and registration namespace before its
// tests run; every helper reads them from there. The helpers that Register
// something delete it when the test ends (t.Cleanup), so that each test
// passes alone, after the others and with -count=2.
package hubtest
