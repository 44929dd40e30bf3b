package main

import (
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"k8s.io/apimachinery/pkg/util/validation"
	clientauthv1 "k8s.io/client-go/pkg/apis/clientauthentication/v1"
)

// execInfoEnv is where client-go passes the ExecCredential request.
const execInfoEnv = "KUBERNETES_EXEC_INFO"

func main() {
	err := run(os.Args[1:], os.Getenv(execInfoEnv), os.Stdout)
	if errors.Is(err, flag.ErrHelp) {
		return
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "widgethub-credential:", err)
		os.Exit(1)
	}
}

// run writes the ExecCredential of the member that args and execInfo name.
func run(args []string, execInfo string, out io.Writer) error {
	fs := flag.NewFlagSet("widgethub-credential", flag.ContinueOnError)
	fs.Usage = func() {
		fmt.Fprintf(fs.Output(), "Usage: widgethub-credential --token-dir DIR [--member NAME]\n\n"+
			"A client-go exec credential plugin: prints the ExecCredential (client.authentication.k8s.io/v1)\n"+
			"with the token of DIR/<member>/token, when the server named in %s is DIR/<member>/server.\n"+
			"The member is --member, or the cluster's client.authentication.k8s.io/exec extension {\"member\": NAME}\n"+
			"(given to the plugin with provideClusterInfo).\n\n", execInfoEnv)
		fs.PrintDefaults()
	}
	dir := fs.String("token-dir", "", "Directory with a <member>/token and <member>/server per member (required).")
	member := fs.String("member", "", "The member whose token to hand out; empty: the one the cluster's exec extension names.")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *dir == "" {
		return errors.New("--token-dir is required")
	}
	req := &clientauthv1.ExecCredential{}
	if execInfo == "" {
		return fmt.Errorf("%s is not set: run me as a client-go exec plugin", execInfoEnv)
	}
	if err := json.Unmarshal([]byte(execInfo), req); err != nil {
		return fmt.Errorf("%s is not an ExecCredential", execInfoEnv)
	}
	if req.Spec.Cluster == nil {
		return errors.New("no cluster information: set provideClusterInfo in the access provider's execConfig")
	}
	name := *member
	if name == "" {
		var ext struct {
			Member string `json:"member"`
		}
		if len(req.Spec.Cluster.Config.Raw) == 0 || json.Unmarshal(req.Spec.Cluster.Config.Raw, &ext) != nil || ext.Member == "" {
			return errors.New(`the cluster names no member: give --member, or the extension client.authentication.k8s.io/exec {"member": NAME}`)
		}
		name = ext.Member
	}
	if errs := validation.IsDNS1123Subdomain(name); len(errs) > 0 || strings.Contains(name, "..") {
		return errors.New("the member name is not a DNS subdomain")
	}
	server, err := os.ReadFile(filepath.Join(*dir, name, "server"))
	if err != nil {
		return fmt.Errorf("member %q: no server recorded in the token directory", name)
	}
	if strings.TrimSpace(string(server)) != req.Spec.Cluster.Server {
		return fmt.Errorf("member %q: the cluster's server is not the member's; no token handed out", name)
	}
	token, err := os.ReadFile(filepath.Join(*dir, name, "token"))
	if err != nil {
		return fmt.Errorf("member %q: no token in the token directory", name)
	}
	resp := &clientauthv1.ExecCredential{
		TypeMeta: req.TypeMeta,
		Status:   &clientauthv1.ExecCredentialStatus{Token: strings.TrimSpace(string(token))},
	}
	if resp.APIVersion == "" {
		resp.APIVersion, resp.Kind = clientauthv1.SchemeGroupVersion.String(), "ExecCredential"
	}
	return json.NewEncoder(out).Encode(resp)
}
