package catalog

import (
	"encoding/base64"
	"net/url"
	"strings"
)

// minSecretLen: shorter values are not replaced (replacing "a" everywhere
// would garble the message, and such values are not secrets anyway).
const minSecretLen = 4

// secretValues lists the values of cfg that must not appear in errors.
func secretValues(cfg Config) []string {
	var out []string
	add := func(v string) {
		if len(v) < minSecretLen {
			return
		}
		out = append(out, v)
		// Form- and URL-encoded copies, as a server may echo a request body.
		for _, e := range []string{url.QueryEscape(v), url.PathEscape(v)} {
			if e != v {
				out = append(out, e)
			}
		}
	}
	add(cfg.S3.SecretAccessKey)
	for k, v := range cfg.Properties {
		if isSecretKey(k) {
			add(v)
			// credential is "client_id:client_secret".
			if _, secret, ok := strings.Cut(v, ":"); ok {
				add(secret)
			}
		}
	}
	if u, err := url.Parse(cfg.URI); err == nil && u.User != nil {
		if p, ok := u.User.Password(); ok {
			add(p)
			// The HTTP client sends URL userinfo as a Basic auth header.
			add(base64.StdEncoding.EncodeToString([]byte(u.User.Username() + ":" + p)))
		}
	}

	return out
}

func isSecretKey(k string) bool {
	k = strings.ToLower(k)
	for _, s := range []string{"secret", "token", "credential", "password", "passwd", "private-key"} {
		if strings.Contains(k, s) {
			return true
		}
	}

	return false
}

// redactedError hides secret values in the message of err. errors.Is and
// errors.As still see err through Unwrap.
type redactedError struct {
	msg string
	err error
}

func (e *redactedError) Error() string { return e.msg }
func (e *redactedError) Unwrap() error { return e.err }

// redact returns err with every secret replaced by "***" in its message.
func redact(err error, secrets []string) error {
	if err == nil || len(secrets) == 0 {
		return err
	}
	msg := err.Error()
	changed := false
	for _, s := range secrets {
		if strings.Contains(msg, s) {
			msg = strings.ReplaceAll(msg, s, "***")
			changed = true
		}
	}
	if !changed {
		return err
	}

	return &redactedError{msg: msg, err: err}
}
