package delta

import "net/url"

// urlUnescape decodes an add action's path, which the protocol stores
// URL-encoded (delta-rs encodes partition directories).
func urlUnescape(p string) (string, error) { return url.PathUnescape(p) }
