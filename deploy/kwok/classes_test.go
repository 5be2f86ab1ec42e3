package kwok

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"
)

// deploy/kwok/classes.yaml's classes are created, and applying them again
// (a retried set-up) changes nothing and fails nothing.
func TestApplyClassesCreatesTheKwokClasses(t *testing.T) {
	cs := fake.NewClientset()
	path := ClassesFile(filepath.Join("..", ".."))
	for range 2 {
		if err := ApplyClasses(context.Background(), cs, path); err != nil {
			t.Fatalf("apply %s: %v", path, err)
		}
	}
	rcs, err := cs.NodeV1().RuntimeClasses().List(context.Background(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var runtimes []string
	for _, rc := range rcs.Items {
		runtimes = append(runtimes, rc.Name+"="+rc.Handler)
	}
	slices.Sort(runtimes)
	if want := []string{"kata=kata", "runc=runc"}; !slices.Equal(runtimes, want) {
		t.Errorf("RuntimeClasses %v, want %v", runtimes, want)
	}
	scs, err := cs.StorageV1().StorageClasses().List(context.Background(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(scs.Items) != 1 || scs.Items[0].Name != "standard" || scs.Items[0].Provisioner != "kubernetes.io/no-provisioner" {
		t.Errorf("StorageClasses %+v, want standard with no provisioner", scs.Items)
	}
}

// A file with anything but classes is refused, and names the file.
func TestApplyClassesRefusesOtherKinds(t *testing.T) {
	path := filepath.Join(t.TempDir(), "classes.yaml")
	doc := "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: x\n"
	if err := os.WriteFile(path, []byte(doc), 0o644); err != nil {
		t.Fatal(err)
	}
	err := ApplyClasses(context.Background(), fake.NewClientset(), path)
	if err == nil || !strings.Contains(err.Error(), path) || !strings.Contains(err.Error(), "ConfigMap") {
		t.Errorf("err = %v, want one naming %s and the ConfigMap", err, path)
	}
}
