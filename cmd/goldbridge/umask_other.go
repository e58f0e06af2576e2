//go:build !unix

package main

// privateUmask: no umask outside Unix.
func privateUmask() {}
