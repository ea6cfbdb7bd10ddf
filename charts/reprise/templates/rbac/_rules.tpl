{{/* The operator's permissions, one place for the ClusterRole and the per-namespace Roles.
Each rule names the code that needs it; nothing is granted "just in case". */}}
{{- define "reprise.rbac.namespacedRules" -}}
# Its own resources: Kopf lists and watches them, patches finalizers and its bookkeeping annotations,
# and the finished-resource TTL deletes them (lifecycle.expire_finished).
- apiGroups: ["reprise.io"]
  resources: {{ include "reprise.kinds.plurals" . }}
  verbs: ["get", "list", "watch", "patch", "delete"]
# A LakeReplay with `then.reconsume` continues on the live topic with a Reconsume it creates and owns.
- apiGroups: ["reprise.io"]
  resources: ["reconsumes"]
  verbs: ["create"]
# Status is written only through the status subresource (kube.Kube.patch_status).
- apiGroups: ["reprise.io"]
  resources: {{ include "reprise.kinds.statusPlurals" . }}
  verbs: ["get", "patch"]
# Standby replay consumers and drains: created, read back (idempotent create, the live template), deleted.
# No update/patch of Deployments: Reprise never edits a Deployment, it only scales (below).
- apiGroups: ["apps"]
  resources: ["deployments"]
  verbs: ["get", "create", "delete"]
# Rewind scales the live Deployment to zero and back; Suspend scales the replay Deployment.
- apiGroups: ["apps"]
  resources: ["deployments/scale"]
  verbs: ["patch"]
# Backfill Jobs; suspending a Backfill patches the Job's spec.suspend (kube.Kube.suspend_job).
- apiGroups: ["batch"]
  resources: ["jobs"]
  verbs: ["get", "create", "patch", "delete"]
# Teardown waits until the replay pods are gone before deleting the replay group (list by label only).
- apiGroups: [""]
  resources: ["pods"]
  verbs: ["list"]
# The Rewind rollback snapshot.
- apiGroups: [""]
  resources: ["configmaps"]
  verbs: ["get", "create", "delete"]
# Events on the resources (Kopf posts them: create only, it never edits one).
- apiGroups: [""]
  resources: ["events"]
  verbs: ["create"]
{{- if .Values.rbac.secrets.enabled }}
# The Kafka client settings named by spec.kafka.configFrom: `get` by name only, never list or watch.
- apiGroups: [""]
  resources: ["secrets"]
  verbs: ["get"]
  {{- with .Values.rbac.secrets.names }}
  resourceNames:
    {{- toYaml . | nindent 4 }}
  {{- end }}
{{- end }}
{{- if .Values.rbac.sparkApplications }}
# LakeReplay's Spark application (Kubeflow Spark Operator); suspending a LakeReplay patches its spec.suspend.
- apiGroups: ["sparkoperator.k8s.io"]
  resources: ["sparkapplications"]
  verbs: ["get", "create", "patch", "delete"]
{{- end }}
{{- end }}
