package report

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestSummarize(t *testing.T) {
	in := `{"test":"A","sink":"postgres","fault":"kill -9","faults":1,"checked":100,"stall_ms":3100,"recovery_ms":1000}
{"test":"B","sink":"delta","fault":"kill sink/quick","faults":4,"checked":50,"stall_ms":900,"recovery_ms":400}
{"test":"B","sink":"delta","fault":"kill sink/slow","faults":1,"checked":50,"stall_ms":700,"recovery_ms":-1}

{"test":"A","sink":"postgres","fault":"kill -9","faults":2,"checked":200,"dups":1,"stall_ms":2000,"recovery_ms":1500,"failed":true}
`
	var out strings.Builder
	n, err := Summarize(strings.NewReader(in), &out)
	require.NoError(t, err)
	require.Equal(t, 4, n)
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	require.Len(t, lines, 4)
	require.Equal(t, []string{"delta", "kill", "sink/quick", "1", "4", "50", "0", "0", "900ms", "400ms", "ok"}, strings.Fields(lines[1]))
	require.Equal(t, []string{"delta", "kill", "sink/slow", "1", "1", "50", "0", "0", "700ms", "-", "ok"}, strings.Fields(lines[2]))
	require.Equal(t, []string{"postgres", "kill", "-9", "2", "3", "300", "1", "0", "3.1s", "1.5s", "FAIL"}, strings.Fields(lines[3]))

	_, err = Summarize(strings.NewReader("{\"sink\":1}\n"), &out)
	require.ErrorContains(t, err, "line 1")
}
