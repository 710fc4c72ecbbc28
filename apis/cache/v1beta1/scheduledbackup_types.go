package v1beta1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// RedisClusterScheduledBackupSpec takes a RedisClusterBackup of one
// RedisCluster on a cron schedule and deletes old ones by a retention policy.
type RedisClusterScheduledBackupSpec struct {
	// Schedule is when to take a backup: a cron expression of five fields
	// (minute hour day-of-month month day-of-week, for example "0 3 * * *"),
	// a descriptor (@hourly, @daily, @weekly, @monthly, @yearly) or
	// "@every <duration>" (for example "@every 6h"), in UTC. The syntax is
	// robfig/cron v3's ParseStandard.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=128
	// +kubebuilder:validation:Pattern=`^(@(yearly|annually|monthly|weekly|daily|midnight|hourly)|@every ([0-9]+(\.[0-9]+)?(ns|us|ms|s|m|h))+|[0-9A-Za-z*?/,-]+( +[0-9A-Za-z*?/,-]+){4})$`
	// +required
	Schedule string `json:"schedule"`

	// Suspend stops new backups; retention still applies.
	// Defaults to false.
	// +kubebuilder:default=false
	// +optional
	Suspend bool `json:"suspend,omitempty"`

	// StartingDeadlineSeconds bounds how late a backup may start after its
	// scheduled time (as a CronJob's): when the operator was down or the
	// schedule suspended across a scheduled time, only the most recent
	// missed time is taken, and only if it is at most this old; older ones
	// are skipped with a MissedSchedule event. Unset: the most recent missed
	// time is always taken.
	// +kubebuilder:validation:Minimum=1
	// +optional
	StartingDeadlineSeconds *int64 `json:"startingDeadlineSeconds,omitempty"`

	// Retention says which backups of this schedule to delete, with their
	// objects in the store. The newest Completed backup is never deleted,
	// nor a backup still Pending or Running.
	// +optional
	Retention RetentionPolicy `json:"retention,omitempty"`

	// Template is the spec of every RedisClusterBackup taken.
	// +required
	Template RedisClusterBackupSpec `json:"template"`
}

// RetentionPolicy keeps a schedule's backups by count and by age; a
// Completed backup is deleted when either limit is passed.
type RetentionPolicy struct {
	// KeepLast is how many Completed backups to keep, newest first.
	// Defaults to 7.
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=1000
	// +kubebuilder:default=7
	// +optional
	KeepLast int32 `json:"keepLast,omitempty"`

	// MaxAge deletes Completed and Failed backups that ended longer ago than
	// this, for example 720h. Unset keeps backups of any age.
	// +optional
	MaxAge *metav1.Duration `json:"maxAge,omitempty"`
}

// RedisClusterScheduledBackupStatus is the observed state of a schedule.
type RedisClusterScheduledBackupStatus struct {
	// ObservedGeneration is the metadata.generation last reconciled.
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`

	// Conditions: ScheduleValid, ObjectStoreReady (the newest backup's),
	// LastBackupComplete, RetentionApplied.
	// +listType=map
	// +listMapKey=type
	// +kubebuilder:validation:MaxItems=8
	// +optional
	Conditions []metav1.Condition `json:"conditions,omitempty"`

	// LastScheduleTime is the scheduled time of the last backup created
	// (or skipped because the previous one still ran).
	// +optional
	LastScheduleTime *metav1.Time `json:"lastScheduleTime,omitempty"`

	// NextScheduleTime is the next scheduled time; unset while suspended or
	// with an invalid schedule.
	// +optional
	NextScheduleTime *metav1.Time `json:"nextScheduleTime,omitempty"`

	// LastSuccessfulTime is the end time of the newest Completed backup.
	// +optional
	LastSuccessfulTime *metav1.Time `json:"lastSuccessfulTime,omitempty"`

	// LastSuccessfulBackup names the newest Completed backup.
	// +kubebuilder:validation:MaxLength=253
	// +optional
	LastSuccessfulBackup string `json:"lastSuccessfulBackup,omitempty"`

	// Active names the backup of this schedule still Pending or Running.
	// +kubebuilder:validation:MaxLength=253
	// +optional
	Active string `json:"active,omitempty"`
}

// RedisClusterScheduledBackup takes RedisClusterBackups of a RedisCluster
// on a cron schedule, one at a time (a scheduled time is skipped while the
// previous backup still runs), and deletes old ones with their objects by
// its retention policy. The backups it creates carry the label
// cache.redis.io/scheduled-backup=<name> and are owned by it: deleting the
// schedule deletes their objects in Kubernetes (the RedisClusterBackups), not
// in the store.
//
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:shortName=rcsb,categories=redis
// +kubebuilder:validation:XValidation:rule="size(self.metadata.name) <= 63",message="metadata.name: at most 63 characters (it is the value of the cache.redis.io/scheduled-backup label of its backups)"
// +kubebuilder:printcolumn:name="Cluster",type=string,JSONPath=`.spec.template.clusterName`
// +kubebuilder:printcolumn:name="Schedule",type=string,JSONPath=`.spec.schedule`
// +kubebuilder:printcolumn:name="Suspend",type=boolean,JSONPath=`.spec.suspend`
// +kubebuilder:printcolumn:name="Last",type=date,JSONPath=`.status.lastScheduleTime`
// +kubebuilder:printcolumn:name="Last Successful",type=string,JSONPath=`.status.lastSuccessfulBackup`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type RedisClusterScheduledBackup struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// Spec is the schedule.
	// +required
	Spec RedisClusterScheduledBackupSpec `json:"spec"`

	// Status is the observed state.
	// +optional
	Status RedisClusterScheduledBackupStatus `json:"status,omitempty"`
}

// RedisClusterScheduledBackupList is a list of RedisClusterScheduledBackup.
//
// +kubebuilder:object:root=true
type RedisClusterScheduledBackupList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []RedisClusterScheduledBackup `json:"items"`
}

// ScheduledBackupLabel is the label on every RedisClusterBackup a schedule
// creates; its value is the schedule's name.
const ScheduledBackupLabel = "cache.redis.io/scheduled-backup"

// Condition types of a RedisClusterScheduledBackup.
const (
	// ScheduledBackupScheduleValidCondition is False when spec.schedule does not parse.
	ScheduledBackupScheduleValidCondition = "ScheduleValid"
	// ScheduledBackupObjectStoreReadyCondition mirrors the ObjectStoreReady
	// condition of the newest backup (for example False, AccessDenied, for a
	// wrong credential).
	ScheduledBackupObjectStoreReadyCondition = "ObjectStoreReady"
	// ScheduledBackupLastBackupCompleteCondition is True when the newest
	// finished backup is Completed, False when it Failed.
	ScheduledBackupLastBackupCompleteCondition = "LastBackupComplete"
	// ScheduledBackupRetentionAppliedCondition is False when deleting an
	// expired backup (its objects or its RedisClusterBackup) failed.
	ScheduledBackupRetentionAppliedCondition = "RetentionApplied"
)

// Condition reasons of a RedisClusterScheduledBackup (beside the
// RedisClusterBackup reasons it mirrors).
const (
	// ScheduledBackupValidReason: the schedule parses.
	ScheduledBackupValidReason = "Valid"
	// ScheduledBackupInvalidScheduleReason: the schedule does not parse; the message says why.
	ScheduledBackupInvalidScheduleReason = "InvalidSchedule"
	// ScheduledBackupNoBackupYetReason: no backup finished (or started) yet.
	ScheduledBackupNoBackupYetReason = "NoBackupYet"
	// ScheduledBackupAppliedReason: every expired backup is deleted.
	ScheduledBackupAppliedReason = "Applied"
	// ScheduledBackupDeleteFailedReason: deleting an expired backup failed.
	ScheduledBackupDeleteFailedReason = "DeleteFailed"
)

func init() {
	SchemeBuilder.Register(&RedisClusterScheduledBackup{}, &RedisClusterScheduledBackupList{})
}
