package storetest

import "github.com/mkit-dev/mkitfdb/store"

// Format implements store.Formats: the inner store's format of namespace
// (store.FormatOf: 1 when the inner store keeps none). It is not a call:
// it is neither counted nor faulted.
func (f *Faults) Format(namespace string) uint32 { return store.FormatOf(f.inner, namespace) }

var _ store.Formats = (*Faults)(nil)

// Format forwards to the Reader of the inner store (store.FormatOf).
func (r *faultReader) Format(namespace string) uint32 { return r.f.Format(namespace) }

// Format forwards to the inner store (store.FormatOf).
func (r *recorder) Format(namespace string) uint32 { return r.f.Format(namespace) }
