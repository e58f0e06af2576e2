// Package pii is crypto-shredding (docs/privacy.md, option 2): chosen top-level fields
// of a JSON payload are encrypted at ingest with a key of the payload's subject
// (AES-256-GCM, random nonce), so Bronze never holds them in clear; Silver decrypts
// them while parsing; deleting the subject's key (Shred) makes every copy in Bronze
// unreadable without rewriting a file, and a replay then yields NULL for those fields.
//
// An encrypted value is the JSON string "gbpii:v1:<key id>:<base64url(nonce|ciphertext)>"
// whose plaintext is the field's original JSON token (a string with its quotes, a
// number, true, false, null), authenticated with the key id and the field name. The key
// id is derived from the subject (KeyID); key material is never logged or printed.
package pii

import (
	"bytes"
	"context"
	"crypto/aes"
	"crypto/cipher"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"

	"goldbridge/lakehouse/jsonscan"
)

// KeyStore keeps one AES-256 key per subject, by key id.
type KeyStore interface {
	// Key returns the key of id. With create it makes and stores a random key when there
	// is none; without, ok is false when there is none (never created, or shredded).
	Key(ctx context.Context, id string, create bool) (key []byte, ok bool, err error)
	// Delete deletes the key of id for good; deleted is false when there was none.
	Delete(ctx context.Context, id string) (deleted bool, err error)
}

// Spec names the subject field and the PII fields of an entity's payloads (top-level
// keys of the JSON object).
type Spec struct {
	Subject string
	Fields  []string
}

// KeyID is the key id of a subject: the first 128 bits of SHA-256 over a fixed prefix
// and the subject's value, in hex.
func KeyID(subject string) string {
	sum := sha256.Sum256([]byte("goldbridge-pii-v1:" + subject))
	return hex.EncodeToString(sum[:16])
}

const tokenPrefix = "gbpii:v1:"

// MaxPayload bounds the payloads Encrypt and Decrypt rewrite; larger ones are refused.
const MaxPayload = 16 << 20

// Codec encrypts and decrypts payloads for one Spec. It is safe for concurrent use and
// caches the keys it has seen for its life (one run).
type Codec struct {
	spec   Spec
	fields map[string]bool
	store  KeyStore

	mu    sync.Mutex
	cache map[string]cipher.AEAD // key id -> AEAD, nil when the key is gone
}

// NewCodec returns a Codec for spec over store.
func NewCodec(spec Spec, store KeyStore) (*Codec, error) {
	if spec.Subject == "" || len(spec.Fields) == 0 {
		return nil, errors.New("pii: a subject field and at least one field are required")
	}
	if slices.Contains(spec.Fields, spec.Subject) {
		return nil, fmt.Errorf("pii: the subject field %s cannot be encrypted (it names the key)", spec.Subject)
	}
	c := &Codec{spec: spec, fields: map[string]bool{}, store: store, cache: map[string]cipher.AEAD{}}
	for _, f := range spec.Fields {
		c.fields[f] = true
	}
	return c, nil
}

func (c *Codec) aead(ctx context.Context, id string, create bool) (cipher.AEAD, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if a, ok := c.cache[id]; ok && (a != nil || !create) {
		return a, nil
	}
	key, ok, err := c.store.Key(ctx, id, create)
	if err != nil {
		return nil, fmt.Errorf("pii key store: %w", err)
	}
	var a cipher.AEAD
	if ok {
		if len(key) != 32 {
			return nil, fmt.Errorf("pii key %s: %d bytes, want 32", id, len(key))
		}
		block, err := aes.NewCipher(key)
		if err != nil {
			return nil, err
		}
		if a, err = cipher.NewGCM(block); err != nil {
			return nil, err
		}
	}
	c.cache[id] = a
	return a, nil
}

// Encrypt returns payload with the PII fields encrypted under the subject's key
// (created on first use). A payload that is not a JSON object, or holds none of the
// fields, is returned as is; when the subject is missing or not a string or number,
// the PII fields are replaced by null (there is no key to encrypt them with, and they
// must not land in clear).
func (c *Codec) Encrypt(ctx context.Context, payload []byte) ([]byte, error) {
	if len(payload) > MaxPayload {
		return nil, fmt.Errorf("pii: payload of %d bytes exceeds %d", len(payload), MaxPayload)
	}
	members, ok := topLevel(payload)
	if !ok {
		return payload, nil
	}
	var subject string
	hasSubject, any := false, false
	for _, m := range members {
		switch {
		case m.key == c.spec.Subject:
			subject, hasSubject = scalarText(payload[m.lo:m.hi])
		case c.fields[m.key]:
			any = true
		}
	}
	if !any {
		return payload, nil
	}
	var a cipher.AEAD
	id := ""
	if hasSubject {
		id = KeyID(subject)
		var err error
		if a, err = c.aead(ctx, id, true); err != nil {
			return nil, err
		}
	}
	return rewrite(payload, members, func(m member) ([]byte, error) {
		if !c.fields[m.key] {
			return nil, nil
		}
		tok := payload[m.lo:m.hi]
		if a == nil || isEncrypted(tok) {
			if a == nil {
				return []byte("null"), nil
			}
			return nil, nil // already encrypted (a replayed payload): kept
		}
		nonce := make([]byte, a.NonceSize())
		if _, err := rand.Read(nonce); err != nil {
			return nil, err
		}
		sealed := a.Seal(nonce, nonce, tok, aad(id, m.key))
		return json.Marshal(tokenPrefix + id + ":" + base64.RawURLEncoding.EncodeToString(sealed))
	})
}

// Decrypt returns payload with every encrypted PII field replaced by its plaintext, or
// by null when the subject's key was shredded. A value that does not authenticate is an
// error (reason "pii_undecryptable" in Silver).
func (c *Codec) Decrypt(ctx context.Context, payload []byte) ([]byte, error) {
	if !bytes.Contains(payload, []byte(tokenPrefix)) {
		return payload, nil
	}
	if len(payload) > MaxPayload {
		return nil, fmt.Errorf("pii: payload of %d bytes exceeds %d", len(payload), MaxPayload)
	}
	members, ok := topLevel(payload)
	if !ok {
		return payload, nil
	}
	return rewrite(payload, members, func(m member) ([]byte, error) {
		tok := payload[m.lo:m.hi]
		if !c.fields[m.key] || !isEncrypted(tok) {
			return nil, nil
		}
		var s string
		if err := json.Unmarshal(tok, &s); err != nil {
			return nil, fmt.Errorf("pii field %s: %w", m.key, err)
		}
		id, b64, ok := strings.Cut(strings.TrimPrefix(s, tokenPrefix), ":")
		if !ok {
			return nil, fmt.Errorf("pii field %s: malformed value", m.key)
		}
		a, err := c.aead(ctx, id, false)
		if err != nil {
			return nil, err
		}
		if a == nil {
			return []byte("null"), nil // shredded
		}
		sealed, err := base64.RawURLEncoding.DecodeString(b64)
		if err != nil || len(sealed) < a.NonceSize() {
			return nil, fmt.Errorf("pii field %s: malformed value", m.key)
		}
		plain, err := a.Open(nil, sealed[:a.NonceSize()], sealed[a.NonceSize():], aad(id, m.key))
		if err != nil {
			return nil, fmt.Errorf("pii field %s: does not authenticate", m.key)
		}
		return plain, nil
	})
}

// Shred deletes the key of subject; deleted is false when it had none.
func Shred(ctx context.Context, store KeyStore, subject string) (bool, error) {
	return store.Delete(ctx, KeyID(subject))
}

func aad(id, field string) []byte { return []byte(id + "\x00" + field) }

func isEncrypted(tok []byte) bool {
	return bytes.HasPrefix(tok, []byte(`"`+tokenPrefix))
}

// scalarText is the text of a string (unescaped) or number token.
func scalarText(tok []byte) (string, bool) {
	if len(tok) == 0 {
		return "", false
	}
	switch c := tok[0]; {
	case c == '"':
		var s string
		if json.Unmarshal(tok, &s) != nil || s == "" {
			return "", false
		}
		return s, true
	case c == '-' || c >= '0' && c <= '9':
		return string(tok), true
	}
	return "", false
}

// member is one top-level key of a JSON object and the span of its value.
type member struct {
	key    string
	lo, hi int
}

// rewrite copies payload, replacing the values for which fn returns bytes.
func rewrite(payload []byte, members []member, fn func(member) ([]byte, error)) ([]byte, error) {
	var out []byte
	last := 0
	for _, m := range members {
		rep, err := fn(m)
		if err != nil {
			return nil, err
		}
		if rep == nil {
			continue
		}
		if out == nil {
			out = make([]byte, 0, len(payload)+64)
		}
		out = append(append(out, payload[last:m.lo]...), rep...)
		last = m.hi
	}
	if out == nil {
		return payload, nil
	}
	return append(out, payload[last:]...), nil
}

// topLevel lists the members of the JSON object doc; ok is false when doc is not a
// valid JSON object.
func topLevel(doc []byte) ([]member, bool) {
	if !json.Valid(doc) {
		return nil, false
	}
	i := jsonscan.SkipWS(doc, 0)
	if i >= len(doc) || doc[i] != '{' {
		return nil, false
	}
	var out []member
	i = jsonscan.SkipWS(doc, i+1)
	if i < len(doc) && doc[i] == '}' {
		return out, true
	}
	for i < len(doc) {
		kEnd := jsonscan.SkipString(doc, i)
		var key string
		if kEnd < 0 || json.Unmarshal(doc[i:kEnd], &key) != nil {
			return nil, false
		}
		i = jsonscan.SkipWS(doc, kEnd)
		i = jsonscan.SkipWS(doc, i+1) // ':'
		end := jsonscan.SkipValue(doc, i)
		if end < 0 {
			return nil, false
		}
		out = append(out, member{key: key, lo: i, hi: end})
		i = jsonscan.SkipWS(doc, end)
		if i >= len(doc) || doc[i] == '}' {
			break
		}
		i = jsonscan.SkipWS(doc, i+1) // ','
	}
	return out, true
}
