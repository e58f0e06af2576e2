package pii

import (
	"bytes"
	"context"
	"encoding/json"
	"strings"
	"sync"
	"testing"

	"goldbridge/lakehouse/lakehousetest"
)

// memStore is an in-memory KeyStore.
type memStore struct {
	mu   sync.Mutex
	keys map[string][]byte
}

func (m *memStore) Key(_ context.Context, id string, create bool) ([]byte, bool, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if k, ok := m.keys[id]; ok {
		return k, true, nil
	}
	if !create {
		return nil, false, nil
	}
	k := bytes.Repeat([]byte{byte(len(m.keys) + 1)}, 32)
	m.keys[id] = k
	return k, true, nil
}

func (m *memStore) Delete(_ context.Context, id string) (bool, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	_, ok := m.keys[id]
	delete(m.keys, id)
	return ok, nil
}

var spec = Spec{Subject: "user_id", Fields: []string{"email", "phone"}}

func decode(t *testing.T, b []byte) map[string]any {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatalf("%s: %v", b, err)
	}
	return m
}

func TestEncryptDecryptShred(t *testing.T) {
	ctx := context.Background()
	store := &memStore{keys: map[string][]byte{}}
	c, err := NewCodec(spec, store)
	if err != nil {
		t.Fatal(err)
	}
	in := []byte(`{"order_id":"o-1","user_id":"u-7","email":"ann@example.com","phone":12345,"nested":{"email":"x"},"amount":1.5}`)
	enc, err := c.Encrypt(ctx, in)
	if err != nil {
		t.Fatal(err)
	}
	for _, clear := range []string{"ann@example.com", "12345"} {
		if bytes.Contains(enc, []byte(clear)) {
			t.Errorf("encrypted payload holds %q: %s", clear, enc)
		}
	}
	m := decode(t, enc)
	if m["order_id"] != "o-1" || m["user_id"] != "u-7" || m["amount"] != 1.5 || m["nested"].(map[string]any)["email"] != "x" {
		t.Errorf("other fields changed: %s", enc)
	}
	again, _ := c.Encrypt(ctx, in)
	if bytes.Equal(again, enc) {
		t.Error("two encryptions are equal: the nonce is not random")
	}
	if twice, _ := c.Encrypt(ctx, enc); !bytes.Equal(twice, enc) {
		t.Error("an encrypted payload is encrypted again")
	}
	dec, err := c.Decrypt(ctx, enc)
	if err != nil || !bytes.Equal(dec, in) {
		t.Fatalf("decrypt: %s, %v; want %s", dec, err, in)
	}
	// Tampering: another field's ciphertext moved over does not authenticate.
	em := decode(t, enc)
	swapped, _ := json.Marshal(map[string]any{"user_id": "u-7", "email": em["phone"]})
	if _, err := c.Decrypt(ctx, swapped); err == nil || strings.Contains(err.Error(), "12345") {
		t.Errorf("swapped ciphertext: %v", err)
	}
	// Shred: a new codec (a new run) reads null, the rest intact.
	if ok, err := Shred(ctx, store, "u-7"); !ok || err != nil {
		t.Fatalf("shred: %v %v", ok, err)
	}
	c2, _ := NewCodec(spec, store)
	dec, err = c2.Decrypt(ctx, enc)
	if err != nil {
		t.Fatal(err)
	}
	m = decode(t, dec)
	if m["email"] != nil || m["phone"] != nil || m["order_id"] != "o-1" || m["amount"] != 1.5 {
		t.Errorf("after shred: %s", dec)
	}
	if ok, _ := Shred(ctx, store, "u-7"); ok {
		t.Error("a second shred deleted something")
	}
}

func TestEncryptEdgeCases(t *testing.T) {
	ctx := context.Background()
	c, _ := NewCodec(spec, &memStore{keys: map[string][]byte{}})
	for _, tc := range []struct{ in, want string }{
		{`not json`, `not json`},
		{`[1,2]`, `[1,2]`},
		{`{"user_id":"u-1","amount":2}`, `{"user_id":"u-1","amount":2}`},          // no PII field
		{`{"email":"a@b","amount":2}`, `{"email":null,"amount":2}`},               // no subject: nulled
		{`{"user_id":null,"email":"a@b"}`, `{"user_id":null,"email":null}`},       // null subject
		{`{"user_id":{"x":1},"email":"a@b"}`, `{"user_id":{"x":1},"email":null}`}, // object subject
	} {
		got, err := c.Encrypt(ctx, []byte(tc.in))
		if err != nil || string(got) != tc.want {
			t.Errorf("Encrypt(%s) = %s, %v; want %s", tc.in, got, err, tc.want)
		}
	}
	if _, err := NewCodec(Spec{Subject: "email", Fields: []string{"email"}}, nil); err == nil {
		t.Error("the subject as a PII field was accepted")
	}
}

func TestSQLStore(t *testing.T) {
	ctx := context.Background()
	lh := lakehousetest.Open(t)
	s, err := NewSQLStore(ctx, lh.DB())
	if err != nil {
		t.Fatal(err)
	}
	if _, ok, err := s.Key(ctx, "a", false); ok || err != nil {
		t.Fatalf("missing key: %v %v", ok, err)
	}
	k1, ok, err := s.Key(ctx, "a", true)
	if !ok || err != nil || len(k1) != 32 {
		t.Fatalf("create: %d bytes, %v %v", len(k1), ok, err)
	}
	if k2, _, _ := s.Key(ctx, "a", true); !bytes.Equal(k1, k2) {
		t.Error("a second create made a new key")
	}
	if ok, err := s.Delete(ctx, "a"); !ok || err != nil {
		t.Fatalf("delete: %v %v", ok, err)
	}
	if _, ok, _ := s.Key(ctx, "a", false); ok {
		t.Error("the key survived Delete")
	}
}

func FuzzDecrypt(f *testing.F) {
	ctx := context.Background()
	c, _ := NewCodec(spec, &memStore{keys: map[string][]byte{}})
	enc, _ := c.Encrypt(ctx, []byte(`{"user_id":"u","email":"e@x","phone":"1"}`))
	f.Add(enc)
	f.Add([]byte(`{"email":"gbpii:v1:00:AAAA"}`))
	f.Add([]byte(`{"email":"gbpii:v1:"}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		out, err := c.Decrypt(ctx, b)
		if err == nil && json.Valid(b) && !json.Valid(out) {
			t.Fatalf("valid %s decrypted to invalid %s", b, out)
		}
		if out, err := c.Encrypt(ctx, b); err == nil && json.Valid(b) && !json.Valid(out) {
			t.Fatalf("valid %s encrypted to invalid %s", b, out)
		}
	})
}
