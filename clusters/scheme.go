package clusters

import (
	"k8s.io/apimachinery/pkg/runtime"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"

	"github.com/widgethub/widgethub/api/v1alpha1"
)

// NewScheme returns the scheme of the hub and its members: client-go's types
// and widgethub.io. The manager, the bench, the demo and the tests use it;
// the plugin keeps its own, of the few kinds it touches, so that it links
// none of the other API groups.
func NewScheme() *runtime.Scheme {
	s := runtime.NewScheme()
	utilruntime.Must(clientgoscheme.AddToScheme(s))
	utilruntime.Must(v1alpha1.AddToScheme(s))
	return s
}
