//go:build unix

package main

import "syscall"

// privateUmask makes the files this process creates from now on 0600 and its
// directories 0700.
func privateUmask() { syscall.Umask(0o077) }
