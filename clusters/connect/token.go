package connect

import (
	"encoding/json"
	"time"

	"k8s.io/apimachinery/pkg/types"
)

// TokenClaims are the claims of a ServiceAccount token that tell whom it
// authenticates, when it was issued, when it expires and which object it is
// bound to. They are read, not verified: the member verifies its tokens.
type TokenClaims struct {
	IssuedAt, Expiry time.Time
	// Namespace and ServiceAccount name the identity.
	Namespace, ServiceAccount string
	// Secret is the Secret (in Namespace) the token is bound to; empty when
	// it is bound to none.
	Secret    string
	SecretUID types.UID
}

// Lifetime is how long the token was issued for.
func (c TokenClaims) Lifetime() time.Duration { return c.Expiry.Sub(c.IssuedAt) }

// ParseTokenClaims reads the claims of a ServiceAccount token issued by the
// TokenRequest API; ok is false for anything else (no JWT, no iat or exp, not
// a ServiceAccount's).
func ParseTokenClaims(token string) (claims TokenClaims, ok bool) {
	payload, ok := JWTPayload(token)
	if !ok {
		return TokenClaims{}, false
	}
	var raw struct {
		Iat, Exp   int64
		Kubernetes *struct {
			Namespace      string `json:"namespace"`
			ServiceAccount *struct {
				Name string `json:"name"`
			} `json:"serviceaccount"`
			Secret *struct {
				Name string    `json:"name"`
				UID  types.UID `json:"uid"`
			} `json:"secret"`
		} `json:"kubernetes.io"`
	}
	if json.Unmarshal(payload, &raw) != nil || raw.Iat <= 0 || raw.Exp <= raw.Iat || raw.Kubernetes == nil || raw.Kubernetes.ServiceAccount == nil {
		return TokenClaims{}, false
	}
	claims = TokenClaims{IssuedAt: time.Unix(raw.Iat, 0), Expiry: time.Unix(raw.Exp, 0),
		Namespace: raw.Kubernetes.Namespace, ServiceAccount: raw.Kubernetes.ServiceAccount.Name}
	if s := raw.Kubernetes.Secret; s != nil {
		claims.Secret, claims.SecretUID = s.Name, s.UID
	}
	return claims, claims.Namespace != "" && claims.ServiceAccount != ""
}

// MinTokenLifetime is the shortest lifetime kube-apiserver issues a token for.
const MinTokenLifetime = 10 * time.Minute

// TokenRequestSeconds is the expirationSeconds to ask for a token that lives
// for lifetime. It is never 3607: kube-apiserver's
// --service-account-extend-token-expiration silently makes a token requested
// for exactly 3607 s live for a year (it does so for Pod-bound tokens only,
// as kube-apiserver v1.36 is written; a Secret-bound token is not extended,
// but nothing here relies on that).
func TokenRequestSeconds(lifetime time.Duration) int64 {
	s := int64(lifetime / time.Second)
	if s == 3607 {
		s++
	}
	return s
}
