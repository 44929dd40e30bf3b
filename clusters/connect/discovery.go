package connect

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/rest"
)

// MaxDiscoveryBytes bounds a member's answer to one discovery request
// (/version, /api, /apis, one group version's resources): the largest, a
// group list, is tens of KiB, the core group version's about 10 KiB.
const MaxDiscoveryBytes = 1 << 20

// GetDiscovery reads the JSON answer to the discovery request path, at most
// MaxDiscoveryBytes, into out. A member that does not serve path answers
// with an error apierrors.IsNotFound recognises.
func GetDiscovery(ctx context.Context, c rest.Interface, path string, out any) error {
	ctx = WithResponseLimit(ctx, MaxDiscoveryBytes)
	body, err := c.Get().AbsPath(path).SetHeader("Accept", "application/json").Do(ctx).Raw()
	if err != nil {
		return err
	}
	if err := json.Unmarshal(body, out); err != nil {
		return fmt.Errorf("GET %s: %w", path, err)
	}
	return nil
}

// ServedResources reads the discovery document of gv: the resources, and
// subresources, a member serves there. The document is the member's word
// (an aggregated API's, for its group), and a client joins the names it
// takes from it into the paths of its next requests: a group, version or
// resource name that is not one path segment ("..", "a%2Fb") would send them
// elsewhere on the member. Such a group version is an error and such a
// resource is left out, as client-go's typed requests refuse them, so that a
// dynamic client is as safe.
func ServedResources(ctx context.Context, c rest.Interface, gv schema.GroupVersion) ([]metav1.APIResource, error) {
	if !pathSegment(gv.Version) || gv.Group != "" && !pathSegment(gv.Group) {
		return nil, fmt.Errorf("invalid group version %q", gv)
	}
	path := "/apis/" + gv.String()
	if gv.Group == "" {
		path = "/api/" + gv.Version
	}
	var list metav1.APIResourceList
	if err := GetDiscovery(ctx, c, path, &list); err != nil {
		return nil, err
	}
	return slices.DeleteFunc(list.APIResources, func(r metav1.APIResource) bool {
		return slices.ContainsFunc(strings.Split(r.Name, "/"), func(segment string) bool { return !pathSegment(segment) })
	}), nil
}

// pathSegment reports whether s is one path segment a request may carry.
func pathSegment(s string) bool {
	return s != "" && len(rest.IsValidPathSegmentName(s)) == 0
}
