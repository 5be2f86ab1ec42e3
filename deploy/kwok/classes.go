package kwok

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"

	nodev1 "k8s.io/api/node/v1"
	storagev1 "k8s.io/api/storage/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/scheme"
)

// ClassesFile is deploy/kwok/classes.yaml in the podslo checkout at repo:
// the RuntimeClasses and StorageClass that deploy/kwok's pod stages read.
func ClassesFile(repo string) string {
	return filepath.Join(repo, "deploy", "kwok", "classes.yaml")
}

// ApplyClasses creates the RuntimeClasses and StorageClasses of the
// multi-document YAML file at path, leaving those that exist already (a
// retried set-up). Any other kind of object is an error.
func ApplyClasses(ctx context.Context, cs kubernetes.Interface, path string) error {
	data, err := os.ReadFile(path)
	if err != nil {
		return fmt.Errorf("read the classes: %w", err)
	}
	r := utilyaml.NewYAMLReader(bufio.NewReader(bytes.NewReader(data)))
	for {
		doc, err := r.Read()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("read %s: %w", path, err)
		}
		if len(bytes.TrimSpace(doc)) == 0 {
			continue
		}
		obj, _, err := scheme.Codecs.UniversalDeserializer().Decode(doc, nil, nil)
		if err != nil {
			return fmt.Errorf("decode %s: %w", path, err)
		}
		switch o := obj.(type) {
		case *nodev1.RuntimeClass:
			_, err = cs.NodeV1().RuntimeClasses().Create(ctx, o, metav1.CreateOptions{})
		case *storagev1.StorageClass:
			_, err = cs.StorageV1().StorageClasses().Create(ctx, o, metav1.CreateOptions{})
		default:
			return fmt.Errorf("%s: a %T, neither a RuntimeClass nor a StorageClass", path, obj)
		}
		if err != nil && !apierrors.IsAlreadyExists(err) {
			return fmt.Errorf("create the classes of %s: %w", path, err)
		}
	}
}
