package console_test

import (
	"testing"

	"github.com/sluice-dev/sluice/internal/pgtest"
)

func TestMain(m *testing.M) { pgtest.Main(m) }
