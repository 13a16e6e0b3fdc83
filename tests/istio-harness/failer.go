package main

import (
	"fmt"
	"log"
	"os"
	"sync"
)

// failer is the test.Failer that FakeDiscoveryServer and its helpers take: a fatal error ends the
// harness (exit status 3) after running the cleanups registered so far.
type failer struct {
	mu       sync.Mutex
	cleanups []func()
}

func (f *failer) Fail()                     { f.Fatal("fail called") }
func (f *failer) FailNow()                  { f.Fatal("fail now called") }
func (f *failer) Fatalf(s string, a ...any) { f.Fatal(fmt.Sprintf(s, a...)) }
func (f *failer) Log(a ...any)              { log.Print(a...) }
func (f *failer) Logf(s string, a ...any)   { log.Printf(s, a...) }
func (f *failer) Helper()                   {}
func (f *failer) Skip(a ...any)             { f.Fatal(a...) }

func (f *failer) Fatal(a ...any) {
	log.Printf("istio-harness: fatal: %s", fmt.Sprint(a...))
	f.runCleanups()
	os.Exit(3)
}

func (f *failer) TempDir() string {
	d, err := os.MkdirTemp("", "istio-harness")
	if err != nil {
		f.Fatal(err)
	}
	f.Cleanup(func() { _ = os.RemoveAll(d) })
	return d
}

func (f *failer) Cleanup(fn func()) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.cleanups = append(f.cleanups, fn)
}

// runCleanups runs the registered cleanups once, last registered first.
func (f *failer) runCleanups() {
	f.mu.Lock()
	cs := f.cleanups
	f.cleanups = nil
	f.mu.Unlock()
	for i := len(cs) - 1; i >= 0; i-- {
		cs[i]()
	}
}
